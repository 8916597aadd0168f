import NIOCore
import RelayCore

/// Who is online, on which nodes, since when, in which rooms: the hub tells it this node's
/// socket count of each user on every connect and disconnect, and the backend API asks it.
/// Beside room presence (`PresenceManager`), as Centrifuge keeps a user's connections apart
/// from a channel's presence. `MemoryUserDirectory` answers with this node's view;
/// `RedisUserDirectory` with the cluster's, falling back to this node's while Redis is away.
public protocol UserDirectory: AnyObject, Sendable {
    /// This node now has `devices` sockets of `user`; `disconnectedAt` (wall ms) when one of them
    /// just disconnected. Called under the hub's lock, so one user's updates reach the store in
    /// order: it must only enqueue, never wait.
    func updateUser(_ user: String, devices: Int, disconnectedAt: Int64?)

    /// The users' presence (in `local`'s order; `withRooms`: their rooms too); `local` is this
    /// node's view of each. `degraded` when that view is all the answer could be.
    func users(_ local: [UserPresence], withRooms: Bool, on loop: any EventLoop) -> EventLoopFuture<PresenceAnswer<[UserPresence]>>

    /// States this node's sockets per user again (after the store came back): users missing
    /// from `local` have none here any more.
    func restateUsers(_ local: [String: Int])
}
