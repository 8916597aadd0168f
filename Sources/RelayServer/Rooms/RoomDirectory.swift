import NIOConcurrencyHelpers
import RelayBackends
import RelayCore

/// Who is in which room on this node: members, presence (users counted once however many
/// devices) and the event loops a room's members live on, striped by room name; and the rooms
/// each connection is in (the per-connection limit), striped by connection id.
///
/// A room's first member subscribes the node to the room's stream and its last member
/// unsubscribes it, under the room's stripe: the broker only records that and hands it to its
/// own loop, and the webhook queue only appends (its own short lock), so both see a room's
/// occupancy changes in the order they happened. Nothing here writes to a socket or waits.
public final class RoomDirectory: Sendable {
    /// Rooms by name: members, presence, partitions.
    let rooms: LockStripes<RoomRegistry>
    /// Connections by id: the rooms each is in.
    private let memberships: LockStripes<ConnectionRooms>
    /// Joins per user, whatever asks for them (CONNECT's rooms, `room:join`, recovery) and
    /// across the user's sockets and reconnects: each join may announce presence, so a user
    /// cannot make more presence events than this by opening sockets or looping `40`/`41`.
    private let userJoins: LockStripes<KeyedRateLimiter>
    private let broker: any Broker
    private let webhooks: Webhooks?

    init(maxMembersPerRoom: Int, maxRoomsPerConnection: Int, userJoins: EventRateLimiter.Budget, stripes: Int, broker: any Broker, webhooks: Webhooks?) {
        self.rooms = LockStripes(count: stripes) { RoomRegistry(maxMembersPerRoom: maxMembersPerRoom) }
        // Each stripe keeps at most its share of users' buckets (full ones are pruned first).
        self.userJoins = LockStripes(count: stripes) { KeyedRateLimiter(budget: userJoins, maxKeys: 100_000 / max(1, stripes) + 1) }
        self.memberships = LockStripes(count: stripes) { ConnectionRooms(maxRoomsPerConnection: maxRoomsPerConnection) }
        self.broker = broker
        self.webhooks = webhooks
    }

    /// Joins `room`: the connection's place first (refused past `maxRoomsPerConnection`, before
    /// the room is asked whether it is full), then the room's, given back if the room refuses.
    /// Returns the join and the user's presence change on this node, with the room's presence
    /// list when `withPresence` (a CONNECT's joins answer without it, and skip building it).
    func join(room: String, connection id: ConnectionID, user: String, partition: Int, now: Int64, withPresence: Bool = true) throws(RelayError)
        -> (RoomRegistry.JoinResult, PresenceUpdate)
    {
        guard userJoins.stripe(for: user).withLockedValue({ $0.record(user, now: now) }) else {
            throw RelayError(.rateLimited, "too many room joins for this user; retry later")
        }
        let membership = memberships.stripe(for: id)
        let reserved: Bool
        do throws(ConnectionRooms.TooManyRooms) {
            reserved = try membership.withLock { c throws(ConnectionRooms.TooManyRooms) in try c.reserve(room, for: id) }
        } catch {
            throw RelayError(.tooManyRooms, "at most \(error.limit) rooms per connection")
        }
        do throws(RoomRegistry.JoinError) {
            return try rooms.stripe(for: room).withLock { r throws(RoomRegistry.JoinError) in
                let wasOccupied = r.isOccupied(room: room)
                let joined = try r.join(room: room, connection: id, user: user, partition: partition)
                if !wasOccupied { occupancyChanged(room, occupied: true) }
                let presence = withPresence ? r.presence(room: room) : []
                return (joined, PresenceUpdate(before: joined.devicesBefore, after: joined.devicesAfter, presence: presence))
            }
        } catch {
            if reserved { membership.withLockedValue { $0.release(room, for: id) } }
            switch error {
            case .roomFull(let limit): throw RelayError(.roomFull, "room is full (\(limit) members)")
            }
        }
    }

    /// Leaves one room; `nil` if the connection was not in it.
    func leave(room: String, connection id: ConnectionID) -> RoomRegistry.LeaveResult? {
        guard let left = leaveRoomOnly(room, connection: id) else { return nil }
        memberships.stripe(for: id).withLockedValue { $0.release(room, for: id) }
        return left
    }

    /// Leaves every room of a closed connection: its room set out of its stripe, then only
    /// those rooms' stripes, one at a time. With `holdingUntil` (a drop within the presence
    /// grace) the device stays in each room's presence, and the room occupied, until then.
    func leaveAll(connection id: ConnectionID, holdingUntil: Int64? = nil) -> [RoomRegistry.LeaveResult] {
        let joined = memberships.stripe(for: id).withLockedValue { $0.removeAll(for: id) }
        return joined.compactMap { leaveRoomOnly($0, connection: id, holdingUntil: holdingUntil) }
    }

    /// Ends the user's holds in `room` that are due at `now`; `nil` when none were.
    func releaseHolds(room: String, user: String, now: Int64) -> RoomRegistry.LeaveResult? {
        rooms.stripe(for: room).withLockedValue { r in
            guard let left = r.releaseHolds(room: room, user: user, now: now) else { return nil }
            if !r.isOccupied(room: room) { occupancyChanged(room, occupied: false) }
            return left
        }
    }

    private func leaveRoomOnly(_ room: String, connection id: ConnectionID, holdingUntil: Int64? = nil) -> RoomRegistry.LeaveResult? {
        rooms.stripe(for: room).withLockedValue { r in
            guard let left = r.leave(room: room, connection: id, holdingUntil: holdingUntil) else { return nil }
            if !r.isOccupied(room: room) { occupancyChanged(room, occupied: false) }
            return left
        }
    }

    /// Called under the room's stripe: the broker and the webhooks see occupancy in order.
    private func occupancyChanged(_ room: String, occupied: Bool) {
        if occupied { broker.subscribe(.room(room)) } else { broker.unsubscribe(.room(room)) }
        webhooks?.roomOccupancy(room, present: occupied)
    }

    /// Read from the connection's stripe (not the room's): the check before each event a
    /// socket sends contends only with sockets whose ids share the stripe.
    public func isMember(room: String, connection: ConnectionID) -> Bool {
        memberships.stripe(for: connection).withLockedValue { $0.contains(room, for: connection) }
    }

    func rooms(of connection: ConnectionID) -> Set<String> {
        memberships.stripe(for: connection).withLockedValue { $0.rooms(of: connection) }
    }

    /// This node's presence in the room.
    func presence(room: String) -> [PresenceEntry] {
        rooms.stripe(for: room).withLockedValue { $0.presence(room: room) }
    }

    /// The loops that hold members of `room`, and how many members it has, less `excluded`
    /// when it is one: what a publish needs, under one lock.
    func audience(room: String, excluding excluded: ConnectionID?) -> (partitions: [Int], recipients: Int) {
        rooms.stripe(for: room).withLockedValue { r in
            let count = r.memberCount(room: room)
            let isExcluded = excluded.map { r.isMember(room: room, connection: $0) } ?? false
            return (r.partitions(room: room), isExcluded ? count - 1 : count)
        }
    }

    func partitions(room: String) -> [Int] {
        rooms.stripe(for: room).withLockedValue { $0.partitions(room: room) }
    }

    /// Every (room, user, devices) of this node, for restating presence after a Redis outage.
    func allPresence() -> [(room: String, user: String, devices: Int)] {
        rooms.map { $0.allPresence() }.flatMap { $0 }
    }

    var roomCount: Int { rooms.map { $0.roomCount }.reduce(0, +) }
}
