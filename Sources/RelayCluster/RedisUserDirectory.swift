import NIOCore
import RelayBackends
import RelayCore

/// The user directory across nodes, in Redis (`ClusterDirectory`: each node's sockets per
/// user, the last disconnect, the users' rooms). While Redis is unreachable it writes nothing
/// (the node restates its users when Redis returns) and answers with this node's view.
public final class RedisUserDirectory: UserDirectory {
    package let bus: ClusterBus

    public init(bus: ClusterBus) {
        self.bus = bus
    }

    public func updateUser(_ user: String, devices: Int, disconnectedAt: Int64?) {
        guard bus.isUp else { return }
        bus.directory.updateUser(user, devices: devices, disconnected: disconnectedAt != nil)
    }

    public func users(_ local: [UserPresence], withRooms: Bool, on loop: any EventLoop) -> EventLoopFuture<PresenceAnswer<[UserPresence]>> {
        let degraded = PresenceAnswer(local, degraded: true)
        guard bus.isUp else { return loop.makeSucceededFuture(degraded) }
        let names = local.map(\.user)
        let rooms = withRooms ? bus.directory.userRooms(names) : bus.eventLoop.makeSucceededFuture(names.map { _ in [String]() })
        return bus.directory.readUsers(names).and(rooms).map { entries, rooms in
            PresenceAnswer(
                zip(names, zip(entries, rooms)).map { user, e in
                    UserPresence(user: user, devices: e.0.devices, rooms: e.1, lastSeen: e.0.lastSeen)
                })
        }.recover { _ in degraded }.hop(to: loop)
    }

    public func restateUsers(_ local: [String: Int]) {
        guard bus.isUp else { return }
        bus.directory.restateUsers(local)
    }
}
