import NIOCore
import RelayCore

/// What `KeptSessionStore.take` found.
public enum KeptSessionTake: Sendable {
    case taken(KeptSession)
    case notFound
    case otherUser
}

/// Where disconnected sessions wait to be recovered, by `pid`: in memory on one node, in Redis
/// in a cluster (so another node can recover them). A record is taken at most once.
public protocol KeptSessionStore: AnyObject, Sendable {
    /// Keeps `record` for `windowMs`.
    func put(_ record: KeptSession, windowMs: Int64)
    /// Takes the record of `pid` if it is `user`'s (removing it): `.taken`; `.notFound` if there
    /// is none (expired, taken, never existed); `.otherUser` leaves it in place, so a leaked pid
    /// cannot spoil its owner's recovery. Fails when the store cannot be reached.
    func take(pid: String, user: String, on loop: any EventLoop) -> EventLoopFuture<KeptSessionTake>
    /// Keeps a revocation where nodes that start later find it (Redis; nothing in memory).
    func saveRevocation(user: String, cutoff: Int64, ttlSeconds: Int64)
    /// The revocations kept for the cluster, (user, cutoff).
    func revocations(on loop: any EventLoop) -> EventLoopFuture<[(String, Int64)]>
}
