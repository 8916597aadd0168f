import NIOCore
import RelayCore

/// The backend ends a user's sessions (logout, ban, password change): every socket of the user
/// on every node, and optionally every token issued before now.
extension Hub {
    /// Closes every socket of `user` here (4004) and tells the other nodes to; with `revoke`,
    /// its tokens issued before this second are refused from now on, cluster-wide. Returns the
    /// sockets closed on this node.
    @discardableResult
    public func endSessions(of user: String, revoke: Bool) -> Int {
        let now = clock.wallMs() / 1000
        let cutoff: Int64? = revoke ? now : nil
        if let cutoff {
            revocations.withLockedValue { $0.revoke(user, issuedBefore: cutoff, now: now) }
            sessions.saveRevocation(user: user, cutoff: cutoff, ttlSeconds: configuration.revocationTTLSeconds)
        }
        broker.broadcast(.endSessions(user: user, revokedBefore: cutoff))
        return endLocalSessions(of: user)
    }

    /// Whether `user`'s token issued at `issuedAt` was revoked.
    public func isRevoked(_ user: AuthenticatedUser) -> Bool {
        let now = clock.wallMs() / 1000
        return revocations.withLockedValue { $0.isRevoked(user.userID, issuedAt: user.issuedAt, now: now) }
    }

    /// Another node's control message.
    func received(_ control: ControlMessage) {
        switch control {
        case .endSessions(let user, let cutoff):
            if let cutoff {
                let now = clock.wallMs() / 1000
                revocations.withLockedValue { $0.revoke(user, issuedBefore: cutoff, now: now) }
            }
            endLocalSessions(of: user)
        case .handOver(let pid, let user):
            _ = handOver(pid: pid, user: user, on: shards[0].eventLoop)
        }
    }

    /// Closes the user's sockets on this node, one hop per loop that holds some.
    @discardableResult
    func endLocalSessions(of user: String) -> Int {
        let (partitions, count) = userShards.shard(for: user).withLockedValue { ($0.directory.partitions(of: user), $0.directory.connections(of: user).count) }
        for p in partitions {
            let shard = shards[p]
            let close: @Sendable () -> Void = { shard.close(user: user, code: CloseCode.kicked, reason: "session ended by the backend") }
            if shard.eventLoop.inEventLoop { close() } else { shard.eventLoop.execute(close) }
        }
        metrics.sessionsEnded.increment(by: Int64(count))
        return count
    }

    /// Revocations kept in Redis (a node that started after them, or Redis came back).
    func loadRevocations() {
        let now = clock.wallMs() / 1000
        sessions.revocations(on: shards[0].eventLoop).whenSuccess { [revocations] list in
            revocations.withLockedValue { r in
                for (user, cutoff) in list where cutoff + r.ttlSeconds > now { r.revoke(user, issuedBefore: cutoff, now: now) }
            }
        }
    }
}
