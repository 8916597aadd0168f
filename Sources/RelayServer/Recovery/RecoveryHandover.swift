import NIOCore
import RelayBackends
import RelayCore

/// A reconnect with the `pid` of a socket still alive (its drop not noticed yet, on this node or
/// another): the old socket hands its session over (`ConnectionSink.handOver`) instead of the
/// reconnect starting a new one. Tracks the pids of this node's live sockets that take offsets,
/// striped by pid, and takes kept sessions from the store.
final class RecoveryHandover: Sendable {
    private let pids: LockStripes<[String: (ConnectionID, Int)]>
    private let loops: [LoopPartition]
    private let kept: any KeptSessionStore
    private let control: any ControlChannel

    init(stripes: Int, loops: [LoopPartition], kept: any KeptSessionStore, control: any ControlChannel) {
        self.pids = LockStripes(count: stripes) { [:] }
        self.loops = loops
        self.kept = kept
        self.control = control
    }

    /// A socket of this node answers to `pid` now.
    func track(pid: String, connection: ConnectionID, on partition: LoopPartition) {
        pids.stripe(for: pid).withLockedValue { $0[pid] = (connection, partition.index) }
    }

    /// The socket ended; a later socket with the same pid (a recovered one) is left tracked.
    func untrack(pid: String, connection: ConnectionID) {
        pids.stripe(for: pid).withLockedValue { pids in
            if pids[pid]?.0 == connection { pids.removeValue(forKey: pid) }
        }
    }

    /// Asks the live socket of this node with `pid` to close and keep its session for recovery.
    /// Completes on `loop` with whether it did (`false`: no such socket, or another user's).
    func handOver(pid: String, user: String, on loop: any EventLoop) -> EventLoopFuture<Bool> {
        guard let (id, index) = pids.stripe(for: pid).withLockedValue({ $0[pid] }) else { return loop.makeSucceededFuture(false) }
        let partition = loops[index]
        return partition.eventLoop.submit { partition.sink(id)?.handOver(pid: pid, user: user) ?? false }.hop(to: loop)
    }

    /// How long a reconnect waits, in steps, for another node to hand a live connection over
    /// (ms): only when no record was kept and this node has no such connection. About 0.4 s in
    /// all: what a reconnect with an unknown pid costs in a cluster before its new session.
    static let remoteHandOverWaitsMs: [Int64] = [25, 50, 100, 200]

    /// Takes the session kept for `pid`, for `user`. Not kept: a live connection with that pid
    /// on this node hands it over, or, in a cluster, the node that has one is asked to (and the
    /// take is retried while it does).
    func takeKeptSession(pid: String, user: String, on loop: any EventLoop) -> EventLoopFuture<KeptSessionTake> {
        kept.take(pid: pid, user: user, on: loop).flatMap { first in
            guard case .notFound = first else { return loop.makeSucceededFuture(first) }
            // Taken again whatever the answer: the old connection may have ended (and its
            // session been kept) between the first take and the look-up by pid.
            return self.handOver(pid: pid, user: user, on: loop).flatMap { _ in
                self.kept.take(pid: pid, user: user, on: loop)
            }.flatMap { second in
                guard case .notFound = second, self.control.reachesOtherNodes else { return loop.makeSucceededFuture(second) }
                self.control.broadcast(.handOver(pid: pid, user: user))
                return self.retryTake(pid: pid, user: user, on: loop, waits: Self.remoteHandOverWaitsMs[...])
            }
        }
    }

    private func retryTake(pid: String, user: String, on loop: any EventLoop, waits: ArraySlice<Int64>) -> EventLoopFuture<KeptSessionTake> {
        guard let wait = waits.first else { return loop.makeSucceededFuture(.notFound) }
        return loop.scheduleTask(in: .milliseconds(wait)) {}.futureResult.flatMap {
            self.kept.take(pid: pid, user: user, on: loop)
        }.flatMap { result in
            guard case .notFound = result else { return loop.makeSucceededFuture(result) }
            return self.retryTake(pid: pid, user: user, on: loop, waits: waits.dropFirst())
        }
    }
}
