import NIOConcurrencyHelpers
import NIOCore
import RelayCore
import RelayLocks

/// Sessions of a single node, in memory (`KeptSessions`: bounded in all and per user, the
/// oldest out first, O(1) under the lock).
public final class MemoryKeptSessionStore: KeptSessionStore {
    private let state: AuditedLock<KeptSessions>
    private let wallMs: @Sendable () -> Int64

    public init(wallMs: @escaping @Sendable () -> Int64, maxRecords: Int = 100_000, maxPerUser: Int = 64) {
        self.wallMs = wallMs
        self.state = AuditedLock(KeptSessions(maxRecords: maxRecords, maxPerUser: maxPerUser))
    }

    public func put(_ record: KeptSession, windowMs: Int64) {
        let now = wallMs()
        state.withLockedValue { _ = $0.put(record, nowMs: now, windowMs: windowMs) }
    }

    public func take(pid: String, user: String, on loop: any EventLoop) -> EventLoopFuture<KeptSessionTake> {
        let now = wallMs()
        let result = state.withLockedValue { kept -> KeptSessionTake in
            switch kept.take(pid: pid, user: user, nowMs: now) {
            case .taken(let record): return .taken(record)
            case .notFound: return .notFound
            case .otherUser: return .otherUser
            }
        }
        return loop.makeSucceededFuture(result)
    }

    public var count: Int { state.withLockedValue { $0.count } }

    public func saveRevocation(user: String, cutoff: Int64, ttlSeconds: Int64) {}
    public func revocations(on loop: any EventLoop) -> EventLoopFuture<[(String, Int64)]> { loop.makeSucceededFuture([]) }
}
