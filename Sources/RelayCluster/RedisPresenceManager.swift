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
    public func roomPresence(room: String, local: [PresenceEntry], on loop: any EventLoop) -> EventLoopFuture<PresenceAnswer<[PresenceEntry]>> {
        let degraded = PresenceAnswer(local, degraded: true)
        guard bus.isUp else { return loop.makeSucceededFuture(degraded) }
        return bus.presence.read(room: room).map { PresenceAnswer($0) }.recover { _ in degraded }.hop(to: loop)
    }

    public func storedEntries(on loop: any EventLoop) -> EventLoopFuture<[StoredPresence]> {
        guard bus.isUp else { return loop.makeSucceededFuture([]) }
        return bus.presence.stored(node: bus.nodeID).hop(to: loop)
    }
}
