import Foundation
import GRDB
import Logging
import NIOCore
import RelayCore
import RelayLocks

/// The single writer behind `SQLiteReceiptStore`: a dedicated thread (never an event loop) that
/// takes every receipt waiting, writes them in one transaction (group commit), and only after
/// the commit completes their promises — one hop per event loop, not one per receipt.
/// (`@unchecked Sendable`: `pending`, `stopping`, `stopped`, `stopWaiters`, `idle` and
/// `restartWanted` are only touched with `condition` locked; `nextPrune` only by the writer
/// thread.)
final class ReceiptWriter: @unchecked Sendable {
    private struct Pending {
        var receipt: NewReceipt
        var promise: EventLoopPromise<RecordedReceipt>
    }

    private let pool: DatabasePool
    private let options: SQLiteReceiptStore.Options
    private let wallClockMs: @Sendable () -> Int64
    private let logger: Logger
    private let condition = AuditedCondition()
    private var pending: [Pending] = []
    private var stopping = false
    private var stopped = false
    private var stopWaiters: [CheckedContinuation<Void, Never>] = []
    /// The writer thread is waiting for work: only then does `submit` need to signal.
    private var idle = false
    /// The WAL grew past its bound (`WALCheckpointer`): make it start over after this batch.
    private var restartWanted = false
    private var nextPrune: Date

    init(pool: DatabasePool, options: SQLiteReceiptStore.Options, wallClockMs: @escaping @Sendable () -> Int64, logger: Logger) {
        self.pool = pool
        self.options = options
        self.wallClockMs = wallClockMs
        self.logger = logger
        self.nextPrune = Date().addingTimeInterval(5)
        let thread = Thread { [self] in self.run() }
        thread.start()
    }

    func submit(_ receipt: NewReceipt, promise: EventLoopPromise<RecordedReceipt>) {
        submit([(receipt, promise)])
    }

    /// Queues receipts together: the writer takes them in one batch (one transaction) when they
    /// fit in `maxBatch`.
    func submit(_ items: [(NewReceipt, EventLoopPromise<RecordedReceipt>)]) {
        condition.lock()
        if stopping {
            condition.unlock()
            for (_, promise) in items { promise.fail(ReceiptStoreError.closed) }
            return
        }
        for (receipt, promise) in items { pending.append(Pending(receipt: receipt, promise: promise)) }
        if idle { condition.signal() }
        condition.unlock()
    }

    /// The WAL is long: a restarting checkpoint runs between two commits. No wake-up: the
    /// writer is committing (that is why the log grew) and looks after its batch.
    func requestWALRestart() {
        condition.lock()
        restartWanted = true
        condition.unlock()
    }

    /// Stops taking receipts, commits what is queued, and waits for the thread to end.
    func stop() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            requestStop(continuation)
        }
    }

    private func requestStop(_ continuation: CheckedContinuation<Void, Never>) {
        condition.lock()
        stopping = true
        if stopped {
            condition.unlock()
            continuation.resume()
            return
        }
        stopWaiters.append(continuation)
        condition.broadcast()
        condition.unlock()
    }

    private func run() {
        // Named from the thread itself: on Linux a name set before `start` never reaches the
        // kernel, and `top`/`perf` showed the starter's name. (Linux keeps 15 characters.)
        Thread.current.name = "relay-receipts"
        while true {
            condition.lock()
            while pending.isEmpty && !stopping {
                idle = true
                defer { idle = false }
                if options.retentionDays != nil {
                    if !condition.wait(until: nextPrune) { break }
                } else {
                    condition.wait()
                }
            }
            if !pending.isEmpty, pending.count < options.maxBatch, options.maxBatchWaitMs > 0, !stopping {
                idle = true
                _ = condition.wait(until: Date().addingTimeInterval(Double(options.maxBatchWaitMs) / 1000))
                idle = false
            }
            let batch = Array(pending.prefix(options.maxBatch))
            pending.removeFirst(batch.count)
            let exit = stopping && pending.isEmpty
            let restart = restartWanted
            restartWanted = false
            condition.unlock()

            if !batch.isEmpty { commit(batch) }
            if restart { restartWAL() }
            if let days = options.retentionDays, Date() >= nextPrune {
                nextPrune = Date().addingTimeInterval(Double(options.pruneIntervalSeconds))
                let cutoff = wallClockMs() - Int64(days) * 86_400_000
                do {
                    let n = try prune(olderThan: cutoff)
                    if n > 0 { logger.info("pruned receipts", metadata: ["rows": "\(n)"]) }
                } catch {
                    logger.error("receipt retention failed", metadata: ["error": "\(error)"])
                }
            }
            if exit { break }
        }
        condition.lock()
        stopped = true
        let waiters = stopWaiters
        stopWaiters = []
        condition.unlock()
        for w in waiters { w.resume() }
    }

    private func commit(_ batch: [Pending]) {
        let results: Result<[RecordedReceipt], Error>
        let started = DispatchTime.now().uptimeNanoseconds
        do {
            let recorded = try pool.write { db -> [RecordedReceipt] in
                // In a cluster, this node's receipts wait (replicated = 0) for the Redis stream.
                let insert = try db.cachedStatement(
                    sql: "INSERT INTO receipt (room, message_id, author_id, user_id, kind, ts, replicated) VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (message_id, user_id, kind) DO NOTHING")
                let existing = try db.cachedStatement(sql: "SELECT * FROM receipt WHERE message_id = ? AND user_id = ? AND kind = ?")
                var out: [RecordedReceipt] = []
                out.reserveCapacity(batch.count)
                for p in batch {
                    let r = p.receipt
                    try insert.execute(arguments: [r.room, r.messageID, r.authorID, r.userID, r.kind.rawValue, r.ts, options.replicate ? 0 : 1])
                    if db.changesCount > 0 {
                        out.append(RecordedReceipt(receipt: Receipt(id: db.lastInsertedRowID, r), isNew: true))
                    } else if let row = try Row.fetchOne(existing, arguments: [r.messageID, r.userID, r.kind.rawValue]),
                        let stored = SQLiteReceiptStore.receipt(from: row)
                    {
                        out.append(RecordedReceipt(receipt: stored, isNew: false))
                    } else {
                        throw ReceiptStoreError.unavailable("receipt vanished during insert")
                    }
                }
                return out
            }
            results = .success(recorded)
            options.onCommit?(batch.count, recorded.filter(\.isNew).count, Int64(DispatchTime.now().uptimeNanoseconds - started))
        } catch {
            logger.error("receipt commit failed", metadata: ["error": "\(error)", "batch": "\(batch.count)"])
            results = .failure(error)
        }
        complete(batch, results)
    }

    /// Makes the next commit start the WAL over: a restarting checkpoint, from the writer's own
    /// connection, so no commit holds the write lock against it. It copies what the last passive
    /// checkpoint left and waits at most 50 ms for readers (receipt syncs); if it cannot finish,
    /// the checkpointer asks again.
    private func restartWAL() {
        do {
            try pool.writeWithoutTransaction { db in
                try db.execute(sql: "PRAGMA busy_timeout = 50")
                defer { try? db.execute(sql: "PRAGMA busy_timeout = 5000") }
                _ = try db.checkpoint(.restart)
            }
        } catch {
            logger.debug("WAL restart skipped", metadata: ["error": "\(error)"])
        }
    }

    /// Completes promises grouped by event loop: one `execute` per loop.
    private func complete(_ batch: [Pending], _ results: Result<[RecordedReceipt], Error>) {
        var byLoop: [ObjectIdentifier: (any EventLoop, [(EventLoopPromise<RecordedReceipt>, Result<RecordedReceipt, Error>)])] = [:]
        for (i, p) in batch.enumerated() {
            let result: Result<RecordedReceipt, Error>
            switch results {
            case .success(let list): result = .success(list[i])
            case .failure(let error): result = .failure(ReceiptStoreError.unavailable(String(describing: error)))
            }
            let key = ObjectIdentifier(p.promise.futureResult.eventLoop)
            byLoop[key, default: (p.promise.futureResult.eventLoop, [])].1.append((p.promise, result))
        }
        for (_, (loop, items)) in byLoop {
            let box = UnsafeTransfer(items)
            loop.execute {
                for (promise, result) in box.value { promise.completeWith(result) }
            }
        }
    }

    /// Deletes receipts with `ts < cutoff` in chunks; returns rows deleted.
    ///
    /// Cursors grow with time, so the oldest receipts are the lowest ids: each chunk looks at
    /// the 10,000 lowest ids only (no index on `ts` to maintain on every insert), and pruning
    /// stops at the first chunk that has nothing old enough.
    func prune(olderThan cutoff: Int64) throws -> Int {
        var total = 0
        while true {
            let n = try pool.write { db -> Int in
                try db.execute(
                    sql: "DELETE FROM receipt WHERE id IN (SELECT id FROM receipt ORDER BY id LIMIT 10000) AND ts < ?",
                    arguments: [cutoff])
                return db.changesCount
            }
            total += n
            if n == 0 { return total }
        }
    }
}

/// Carries non-Sendable values (promises with results) into one `execute` on their own loop.
/// (`@unchecked Sendable`: handed over once; after the hand-off only that loop touches it.)
struct UnsafeTransfer<Value>: @unchecked Sendable {
    let value: Value
    init(_ value: Value) { self.value = value }
}
