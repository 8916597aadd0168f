import Foundation
import GRDB
import Logging
import RelayLocks

/// Copies the WAL back into the database file from its own connection and thread, so that
/// commits (and the acks waiting on them) never pay for a checkpoint. Passive checkpoints
/// never block the writer; once one has copied every frame, SQLite starts the WAL over from its
/// beginning at the next commit, so the file stops growing. Under steady load that moment never
/// comes (a commit always lands while the checkpoint copies), and the log grew by about 4 KiB
/// per receipt (720 MB in 8 s): past `restartFrames` the checkpointer asks the writer
/// (`wantsRestart`) for a restarting checkpoint between two commits. Not from here: a restart
/// needs the write lock, which a writer committing batch after batch holds almost always, so a
/// restart tried from this connection lost that race again and again on a loaded machine and
/// the log kept growing. (A truncating checkpoint waited up to the 5 s busy timeout: measured as
/// 240 ms ack stalls, so it is only done at shutdown.)
/// (`@unchecked Sendable`: `stopped` and `done` are only touched with `condition` locked.)
final class WALCheckpointer: @unchecked Sendable {
    private let queue: DatabaseQueue
    private let logger: Logger
    private let condition = AuditedCondition()
    private var stopped = false
    private var done = false

    /// WAL frames past which the writer is asked to make the log start over.
    private let restartFrames: Int
    private let wantsRestart: @Sendable () -> Void

    init(path: String, interval: TimeInterval = 0.5, restartFrames: Int = 16_384, logger: Logger, wantsRestart: @escaping @Sendable () -> Void) throws {
        self.restartFrames = restartFrames
        self.wantsRestart = wantsRestart
        var config = Configuration()
        config.busyMode = .timeout(5)
        self.queue = try DatabaseQueue(path: path, configuration: config)
        self.logger = logger
        let thread = Thread { [self] in self.run(interval: interval) }
        thread.start()
    }

    private func run(interval: TimeInterval) {
        Thread.current.name = "relay-wal-ckpt"  // from the thread itself: see ReceiptWriter.run
        while true {
            condition.lock()
            if !stopped { _ = condition.wait(until: Date().addingTimeInterval(interval)) }
            let exit = stopped
            condition.unlock()
            if exit { break }
            do {
                let frames = try queue.writeWithoutTransaction { db in try db.checkpoint(.passive).walFrameCount }
                if frames > restartFrames { wantsRestart() }
            } catch {
                logger.debug("WAL checkpoint skipped", metadata: ["error": "\(error)"])
            }
        }
        // A last full checkpoint at shutdown leaves a small WAL behind.
        try? queue.writeWithoutTransaction { db in _ = try db.checkpoint(.truncate) }
        condition.lock()
        done = true
        condition.broadcast()
        condition.unlock()
    }

    /// Stops the thread (after one last checkpoint) and waits for it.
    func stop() {
        condition.lock()
        stopped = true
        condition.broadcast()
        while !done { condition.wait() }
        condition.unlock()
    }
}
