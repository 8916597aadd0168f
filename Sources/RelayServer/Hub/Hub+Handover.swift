import NIOCore
import RelayCore

/// A reconnect with the `pid` of a socket this node still has: the old socket hands its session
/// over (`ConnectionSink.handOver`) instead of the reconnect starting a new one.
extension Hub {
    /// A socket of this node answers to `pid` now.
    func track(pid: String, connection: ConnectionID, on shard: LoopShard) {
        state.withLockedValue { $0.pids[pid] = (connection, shard.index) }
    }

    /// The socket ended; a later socket with the same pid (a recovered one) is left tracked.
    func untrack(pid: String, connection: ConnectionID) {
        state.withLockedValue { s in
            if s.pids[pid]?.0 == connection { s.pids.removeValue(forKey: pid) }
        }
    }

    /// Asks the live socket of this node with `pid` to close and keep its session for recovery.
    /// Completes on `loop` with whether it did (`false`: no such socket, or another user's).
    func handOver(pid: String, user: String, on loop: any EventLoop) -> EventLoopFuture<Bool> {
        guard let (id, partition) = state.withLockedValue({ $0.pids[pid] }) else { return loop.makeSucceededFuture(false) }
        let shard = shards[partition]
        return shard.eventLoop.submit { shard.sink(id)?.handOver(pid: pid, user: user) ?? false }.hop(to: loop)
    }
}
