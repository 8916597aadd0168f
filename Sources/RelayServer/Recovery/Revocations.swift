import NIOConcurrencyHelpers
import NIOCore
import RelayBackends
import RelayCore
import RelayLocks

/// The backend ends a user's sessions (logout, ban, password change): every socket of the user
/// on every node is closed (4004), and optionally every token issued before now is refused from
/// then on, cluster-wide. Revocations are kept in memory and in the session store (Redis in a
/// cluster) for `ttlSeconds`, at least the longest token lifetime.
final class Revocations: Sendable {
    private let revoked: AuditedLock<RevocationList>
    private let registry: ConnectionRegistry
    private let loops: [LoopPartition]
    private let kept: any KeptSessionStore
    private let control: any ControlChannel
    private let clock: RelayClock
    private let metrics: RelayMetrics

    init(ttlSeconds: Int64, registry: ConnectionRegistry, loops: [LoopPartition], kept: any KeptSessionStore, control: any ControlChannel, clock: RelayClock, metrics: RelayMetrics) {
        self.revoked = AuditedLock(RevocationList(ttlSeconds: ttlSeconds))
        self.registry = registry
        self.loops = loops
        self.kept = kept
        self.control = control
        self.clock = clock
        self.metrics = metrics
    }

    /// Closes every socket of `user` here and tells the other nodes to; with `revoke`, its
    /// tokens issued before this second are refused from now on, cluster-wide. Returns the
    /// sockets closed on this node.
    @discardableResult
    func disconnect(user: String, revoke: Bool) -> Int {
        let now = clock.wallMs() / 1000
        let cutoff: Int64? = revoke ? now : nil
        if let cutoff {
            let ttl = revoked.withLockedValue { r in
                r.revoke(user, issuedBefore: cutoff, now: now)
                return r.ttlSeconds
            }
            kept.saveRevocation(user: user, cutoff: cutoff, ttlSeconds: ttl)
        }
        control.broadcast(.disconnectUser(user: user, revokedBefore: cutoff))
        return endLocalSessions(of: user)
    }

    /// Whether `user`'s token (issued at `issuedAt`) was revoked.
    func isRevoked(_ user: AuthenticatedUser) -> Bool {
        let now = clock.wallMs() / 1000
        return revoked.withLockedValue { $0.isRevoked(user.userID, issuedAt: user.issuedAt, now: now) }
    }

    /// Another node ended a user's sessions.
    func receivedEnd(user: String, revokedBefore cutoff: Int64?) {
        if let cutoff {
            let now = clock.wallMs() / 1000
            revoked.withLockedValue { $0.revoke(user, issuedBefore: cutoff, now: now) }
        }
        endLocalSessions(of: user)
    }

    /// Closes the user's sockets on this node, one hop per loop that holds some.
    @discardableResult
    private func endLocalSessions(of user: String) -> Int {
        let (ids, partitions) = registry.connections(of: user)
        for p in partitions {
            let partition = loops[p]
            let close: @Sendable () -> Void = { partition.close(user: user, code: CloseCode.kicked, reason: "session ended by the backend") }
            if partition.eventLoop.inEventLoop { close() } else { partition.eventLoop.execute(close) }
        }
        metrics.connections.sessionsEnded.increment(by: Int64(ids.count))
        return ids.count
    }

    /// Revocations kept in Redis (a node that started after them, or Redis came back).
    func load(on loop: any EventLoop) {
        let now = clock.wallMs() / 1000
        kept.revocations(on: loop).whenSuccess { [revoked] list in
            revoked.withLockedValue { r in
                for (user, cutoff) in list where cutoff + r.ttlSeconds > now { r.revoke(user, issuedBefore: cutoff, now: now) }
            }
        }
    }
}
