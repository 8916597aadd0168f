import NIOCore
import RelayCore

/// Who is in a room, as Centrifuge's presence manager: the hub tells it this node's device
/// count of a user in a room after every join and leave, and asks it for a room's presence.
/// Users (online, last seen, their rooms) are the `UserDirectory`'s.
/// `MemoryPresenceManager` answers with this node's view; `RedisPresenceManager` with the
/// cluster's, falling back to this node's while Redis is unreachable.
public protocol PresenceManager: AnyObject, Sendable {
    /// This node now has `local.after` devices of `user` in `room` (it had `local.before`);
    /// `local.presence` is this node's presence of the room.
    func update(room: String, user: String, local: PresenceUpdate, on loop: any EventLoop) -> EventLoopFuture<PresenceUpdate>

    /// The room's presence; `local` is this node's.
    func presence(room: String, local: [PresenceEntry], on loop: any EventLoop) -> EventLoopFuture<[PresenceEntry]>

    /// The room's presence as `presence(room:local:on:)`, saying whether it is only this node's.
    func roomPresence(room: String, local: [PresenceEntry], on loop: any EventLoop) -> EventLoopFuture<PresenceAnswer<[PresenceEntry]>>

    /// This node's room presence as the shared store has it (after an outage it may still hold
    /// members who left while the store could not be told). A memory manager keeps no shared
    /// store: none.
    func storedEntries(on loop: any EventLoop) -> EventLoopFuture<[StoredPresence]>
}

/// One (room, user) of this node in the shared store, and its device count there.
public struct StoredPresence: Sendable, Equatable {
    public var room: String
    public var user: String
    public var devices: Int
    public init(room: String, user: String, devices: Int) {
        self.room = room
        self.user = user
        self.devices = devices
    }
}
