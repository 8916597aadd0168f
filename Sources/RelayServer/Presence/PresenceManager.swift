import NIOCore
import RelayCore

/// A user's devices in a room before and after a change, and the room's presence after it:
/// cluster-wide from Redis, or this node's.
public struct PresenceUpdate: Sendable {
    public var before: Int
    public var after: Int
    public var presence: [PresenceEntry]

    /// The user's first device (anywhere) joined.
    public var becamePresent: Bool { before == 0 && after > 0 }
    /// The user's last device (anywhere) left.
    public var leftPresence: Bool { before > 0 && after == 0 }
}

/// Who is in a room, as Centrifuge's presence manager: the hub tells it this node's device
/// count of a user in a room after every join and leave, and asks it for a room's presence.
/// `MemoryPresenceManager` answers with this node's view; `RedisPresenceManager` with the
/// cluster's, falling back to this node's while Redis is unreachable.
public protocol PresenceManager: AnyObject, Sendable {
    /// This node now has `local.after` devices of `user` in `room` (it had `local.before`);
    /// `local.presence` is this node's presence of the room.
    func update(room: String, user: String, local: PresenceUpdate, on loop: any EventLoop) -> EventLoopFuture<PresenceUpdate>

    /// The room's presence; `local` is this node's.
    func presence(room: String, local: [PresenceEntry], on loop: any EventLoop) -> EventLoopFuture<[PresenceEntry]>

    // MARK: Users (PresenceManager+Users.swift)

    /// This node now has `devices` sockets of `user`; `disconnectedAt` (wall ms) when one of them
    /// just disconnected. Called under the hub's lock, so one user's updates reach the store in
    /// order: it must only enqueue, never wait.
    func updateUser(_ user: String, devices: Int, disconnectedAt: Int64?)

    /// The users' presence (in `local`'s order; `withRooms`: their rooms too); `local` is this
    /// node's view of each. `degraded` when that view is all the answer could be.
    func users(_ local: [UserPresence], withRooms: Bool, on loop: any EventLoop) -> EventLoopFuture<PresenceAnswer<[UserPresence]>>

    /// The room's presence as `presence(room:local:on:)`, saying whether it is only this node's.
    func roomPresence(room: String, local: [PresenceEntry], on loop: any EventLoop) -> EventLoopFuture<PresenceAnswer<[PresenceEntry]>>

    /// States this node's sockets per user again (after the store came back): users missing
    /// from `local` have none here any more.
    func restateUsers(_ local: [String: Int])
}

/// Presence of a single node: what this node sees is the whole truth.
public final class MemoryPresenceManager: PresenceManager {
    public init() {}

    public func update(room: String, user: String, local: PresenceUpdate, on loop: any EventLoop) -> EventLoopFuture<PresenceUpdate> {
        loop.makeSucceededFuture(local)
    }

    public func presence(room: String, local: [PresenceEntry], on loop: any EventLoop) -> EventLoopFuture<[PresenceEntry]> {
        loop.makeSucceededFuture(local)
    }
}

/// Presence across nodes, in Redis (`ClusterBus`: per-node device counts, heartbeats, the sweep
/// of dead nodes). While Redis is unreachable it degrades to this node's view.
public final class RedisPresenceManager: PresenceManager {
    let bus: ClusterBus

    public init(bus: ClusterBus) {
        self.bus = bus
    }

    public func update(room: String, user: String, local: PresenceUpdate, on loop: any EventLoop) -> EventLoopFuture<PresenceUpdate> {
        guard bus.isUp else { return loop.makeSucceededFuture(local) }
        return bus.updatePresence(room: room, user: user, devices: local.after).recover { _ in local }.hop(to: loop)
    }

    public func presence(room: String, local: [PresenceEntry], on loop: any EventLoop) -> EventLoopFuture<[PresenceEntry]> {
        guard bus.isUp else { return loop.makeSucceededFuture(local) }
        return bus.presence(room: room).recover { _ in local }.hop(to: loop)
    }
}
