import NIOCore
import RelayCore

/// One user's presence as the presence API answers it.
public struct UserPresence: Sendable, Equatable {
    public var user: String
    /// Sockets of the user (every node's, in a cluster with Redis up).
    public var devices: Int
    /// The rooms the user has presence in, sorted (only when asked for).
    public var rooms: [String]
    /// When a socket of the user last disconnected (wall ms), if known.
    public var lastSeen: Int64?

    public init(user: String, devices: Int, rooms: [String] = [], lastSeen: Int64? = nil) {
        self.user = user
        self.devices = devices
        self.rooms = rooms
        self.lastSeen = lastSeen
    }

    public var online: Bool { devices > 0 }
}

/// An answer of the presence manager, and whether it is only this node's view (a cluster node
/// that cannot reach Redis).
public struct PresenceAnswer<Value: Sendable>: Sendable {
    public var value: Value
    public var degraded: Bool

    public init(_ value: Value, degraded: Bool = false) {
        self.value = value
        self.degraded = degraded
    }
}

extension MemoryPresenceManager {
    public func updateUser(_ user: String, devices: Int, disconnectedAt: Int64?) {}

    public func users(_ local: [UserPresence], withRooms: Bool, on loop: any EventLoop) -> EventLoopFuture<PresenceAnswer<[UserPresence]>> {
        loop.makeSucceededFuture(PresenceAnswer(local))
    }

    public func roomPresence(room: String, local: [PresenceEntry], on loop: any EventLoop) -> EventLoopFuture<PresenceAnswer<[PresenceEntry]>> {
        loop.makeSucceededFuture(PresenceAnswer(local))
    }

    public func restateUsers(_ local: [String: Int]) {}
}

extension RedisPresenceManager {
    public func updateUser(_ user: String, devices: Int, disconnectedAt: Int64?) {
        // While Redis is down nothing is written: the node restates its users when it returns.
        guard bus.isUp else { return }
        bus.updateUser(user, devices: devices, disconnected: disconnectedAt != nil)
    }

    public func users(_ local: [UserPresence], withRooms: Bool, on loop: any EventLoop) -> EventLoopFuture<PresenceAnswer<[UserPresence]>> {
        let degraded = PresenceAnswer(local, degraded: true)
        guard bus.isUp else { return loop.makeSucceededFuture(degraded) }
        let names = local.map(\.user)
        let rooms = withRooms ? bus.userRooms(names) : bus.eventLoop.makeSucceededFuture(names.map { _ in [String]() })
        return bus.readUsers(names).and(rooms).map { entries, rooms in
            PresenceAnswer(
                zip(names, zip(entries, rooms)).map { user, e in
                    UserPresence(user: user, devices: e.0.devices, rooms: e.1, lastSeen: e.0.lastSeen)
                })
        }.recover { _ in degraded }.hop(to: loop)
    }

    public func roomPresence(room: String, local: [PresenceEntry], on loop: any EventLoop) -> EventLoopFuture<PresenceAnswer<[PresenceEntry]>> {
        let degraded = PresenceAnswer(local, degraded: true)
        guard bus.isUp else { return loop.makeSucceededFuture(degraded) }
        return bus.presence(room: room).map { PresenceAnswer($0) }.recover { _ in degraded }.hop(to: loop)
    }

    public func restateUsers(_ local: [String: Int]) {
        guard bus.isUp else { return }
        bus.restateUsers(local)
    }
}
