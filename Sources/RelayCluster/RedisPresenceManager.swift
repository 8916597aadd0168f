import NIOCore
import RelayBackends
import RelayCore

/// Presence across nodes, in Redis (`ClusterBus`: per-node device counts, heartbeats, the sweep
/// of dead nodes). While Redis is unreachable it degrades to this node's view.
public final class RedisPresenceManager: PresenceManager {
    package let bus: ClusterBus

    public init(bus: ClusterBus) {
        self.bus = bus
    }

    public func update(room: String, user: String, local: PresenceUpdate, on loop: any EventLoop) -> EventLoopFuture<PresenceUpdate> {
        guard bus.isUp else { return loop.makeSucceededFuture(local) }
        return bus.presence.update(room: room, user: user, devices: local.after).recover { _ in local }.hop(to: loop)
    }

    public func presence(room: String, local: [PresenceEntry], on loop: any EventLoop) -> EventLoopFuture<[PresenceEntry]> {
        guard bus.isUp else { return loop.makeSucceededFuture(local) }
        return bus.presence.read(room: room).recover { _ in local }.hop(to: loop)
    }
}


extension RedisPresenceManager {
    public func updateUser(_ user: String, devices: Int, disconnectedAt: Int64?) {
        // While Redis is down nothing is written: the node restates its users when it returns.
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

    public func roomPresence(room: String, local: [PresenceEntry], on loop: any EventLoop) -> EventLoopFuture<PresenceAnswer<[PresenceEntry]>> {
        let degraded = PresenceAnswer(local, degraded: true)
        guard bus.isUp else { return loop.makeSucceededFuture(degraded) }
        return bus.presence.read(room: room).map { PresenceAnswer($0) }.recover { _ in degraded }.hop(to: loop)
    }

    public func restateUsers(_ local: [String: Int]) {
        guard bus.isUp else { return }
        bus.directory.restateUsers(local)
    }

    public func storedEntries(on loop: any EventLoop) -> EventLoopFuture<[StoredPresence]> {
        guard bus.isUp else { return loop.makeSucceededFuture([]) }
        return bus.presence.stored(node: bus.nodeID).hop(to: loop)
    }
}
