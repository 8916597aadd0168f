import NIOCore
import RelayBackends
import RelayCore

/// The steps that span services: a connection counted in and out (registry, rooms, typing,
/// live shares, presence), a room joined or left. A service of its own, handed to the socket
/// handlers that need it, so that none of them reaches into the hub.
public final class Membership: Sendable {
    private let registry: ConnectionRegistry
    private let rooms: RoomDirectory
    private let presence: PresenceAnnouncer
    private let typing: TypingService
    private let locations: LiveLocationService
    private let grace: PresenceGrace
    private let clock: RelayClock
    private let metrics: RelayMetrics

    init(
        registry: ConnectionRegistry, rooms: RoomDirectory, presence: PresenceAnnouncer, typing: TypingService, locations: LiveLocationService,
        grace: PresenceGrace, clock: RelayClock, metrics: RelayMetrics
    ) {
        self.registry = registry
        self.rooms = rooms
        self.presence = presence
        self.typing = typing
        self.locations = locations
        self.grace = grace
        self.clock = clock
        self.metrics = metrics
    }

    /// Registers an authenticated connection. Called on the connection's loop.
    public func register(_ sink: any ConnectionSink, sid: String, user: String, on partition: LoopPartition, deflate: Bool = false, ip: String = "", takesOffsets: Bool = false) throws(RelayError) {
        let info = ConnectionInfo(sid: sid, user: user, ip: ip, connectedAtMs: clock.wallMs(), deflate: deflate, loop: partition.index)
        try registry.register(info, id: sink.connectionID, takesOffsets: takesOffsets)
        metrics.connections.open.increment()
        partition.add(sink, user: user)
    }

    /// Removes a connection: leaves its rooms (presence), stops its typing and live shares.
    /// Called on the connection's loop when it closes. `holdPresence`: it dropped (rather than
    /// left or was ended): within the presence grace its user stays present (`PresenceGrace`).
    public func unregister(
        _ id: ConnectionID, sid: String, user: String, on partition: LoopPartition, deflate: Bool = false, takesOffsets: Bool = false,
        holdPresence: Bool = false
    ) {
        let until = holdPresence ? grace.holdUntil(now: clock.monotonicMs()) : nil
        registry.unregister(id, sid: sid, user: user, deflate: deflate, takesOffsets: takesOffsets, wallNow: clock.wallMs(), holdingUntil: until)
        let leaves = rooms.leaveAll(connection: id, holdingUntil: until)
        for leave in leaves {
            typing.connectionLeft(id, room: leave.room)
            partition.leave(room: leave.room, id)
        }
        partition.remove(id)
        metrics.connections.open.decrement()
        for leave in leaves { presence.left(leave, exclude: nil, on: partition.eventLoop) }
        if let until { grace.departed(user, rooms: leaves.map(\.room), until: until) }
        locations.connectionClosed(id)
    }

    /// Joins a room; the future (on the partition's loop) gives the presence list, the joiner
    /// included — cluster-wide when the node is in a cluster and Redis is up, this node's
    /// otherwise.
    public func join(room: String, sink: any ConnectionSink, user: String, on partition: LoopPartition) throws(RelayError) -> EventLoopFuture<[PresenceEntry]> {
        let (joined, update) = try rooms.join(room: room, connection: sink.connectionID, user: user, partition: partition.index, now: clock.monotonicMs())
        partition.join(room: room, sink)
        return presence.joined(
            room: room, user: user, update: update, alreadyMember: joined.alreadyMember, exclude: sink.connectionID, on: partition.eventLoop)
    }

    /// Joins a room for a CONNECT or a recovery, whose answers carry offsets, not presence
    /// lists: none is built and nothing is waited for; others still hear `presence:join`.
    public func joinWithoutPresenceList(room: String, sink: any ConnectionSink, user: String, on partition: LoopPartition) throws(RelayError) {
        let (joined, update) = try rooms.join(
            room: room, connection: sink.connectionID, user: user, partition: partition.index, now: clock.monotonicMs(), withPresence: false)
        partition.join(room: room, sink)
        guard !joined.alreadyMember else { return }
        presence.joinedQuietly(room: room, user: user, update: update, exclude: sink.connectionID, on: partition.eventLoop)
    }

    /// Leaves a room; `false` if the connection was not in it.
    public func leave(room: String, connection id: ConnectionID, on partition: LoopPartition) -> Bool {
        guard let left = rooms.leave(room: room, connection: id) else { return false }
        typing.connectionLeft(id, room: room)
        partition.leave(room: room, id)
        presence.left(left, exclude: id, on: partition.eventLoop)
        locations.connectionLeft(id, room: room)
        return true
    }

    /// Whether the connection is in the room.
    public func isMember(room: String, connection id: ConnectionID) -> Bool {
        rooms.isMember(room: room, connection: id)
    }

    /// The rooms the connection is in.
    public func rooms(of id: ConnectionID) -> Set<String> {
        rooms.rooms(of: id)
    }
}
