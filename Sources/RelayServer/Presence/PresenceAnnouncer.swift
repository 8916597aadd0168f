import NIOCore
import RelayBackends
import RelayCore

/// Who is present, node-wide or cluster-wide, and the `presence:join` / `presence:leave` events
/// that say so: a user's presence change on this node goes to the presence manager (memory, or
/// Redis across nodes), and the room hears about it when the user became present or left
/// everywhere. Also answers the backend's presence queries, and restates this node's presence
/// after a Redis outage.
final class PresenceAnnouncer: Sendable {
    private let rooms: RoomDirectory
    private let registry: ConnectionRegistry
    private let manager: any PresenceManager
    private let directory: any UserDirectory
    private let broker: any Broker
    private let publisher: Publisher
    private let clock: RelayClock
    /// Where futures that no socket waits for complete (restatement after Redis came back).
    private let homeLoop: any EventLoop

    init(
        rooms: RoomDirectory, registry: ConnectionRegistry, manager: any PresenceManager, directory: any UserDirectory, broker: any Broker, publisher: Publisher,
        clock: RelayClock, homeLoop: any EventLoop
    ) {
        self.rooms = rooms
        self.registry = registry
        self.manager = manager
        self.directory = directory
        self.broker = broker
        self.publisher = publisher
        self.clock = clock
        self.homeLoop = homeLoop
    }

    /// After a connection joined `room` on this node: the room's presence (the joiner
    /// included, cluster-wide when there is a cluster and Redis is up), and `presence:join` to
    /// the others when the user became present.
    func joined(room: String, user: String, update local: PresenceUpdate, alreadyMember: Bool, exclude: ConnectionID, on loop: any EventLoop)
        -> EventLoopFuture<[PresenceEntry]>
    {
        if alreadyMember { return presence(room: room, on: loop) }
        return manager.update(room: room, user: user, local: local, on: loop).map { update in
            if update.becamePresent { self.announce(.presenceJoin, room: room, user: user, exclude: exclude) }
            return update.presence
        }
    }

    /// After a connection joined `room` on this node for a CONNECT (no presence list wanted):
    /// `presence:join` to the others when the user became present. A join that took over a
    /// hold changed no device count, here or in the cluster: nothing to tell.
    func joinedQuietly(room: String, user: String, update local: PresenceUpdate, exclude: ConnectionID, on loop: any EventLoop) {
        guard local.after != local.before else { return }
        manager.update(room: room, user: user, local: local, on: loop).whenSuccess { update in
            if update.becamePresent { self.announce(.presenceJoin, room: room, user: user, exclude: exclude) }
        }
    }

    /// After a connection left a room on this node (or its hold ended): `presence:leave` when
    /// the user left everywhere. A leave that left a hold changes nothing yet.
    func left(_ leave: RoomRegistry.LeaveResult, exclude: ConnectionID?, on loop: any EventLoop) {
        guard leave.devicesAfter != leave.devicesBefore else { return }
        let local = PresenceUpdate(before: leave.devicesBefore, after: leave.devicesAfter, presence: [])
        manager.update(room: leave.room, user: leave.user, local: local, on: loop).whenSuccess { update in
            if update.leftPresence { self.announce(.presenceLeave, room: leave.room, user: leave.user, exclude: exclude) }
        }
    }

    /// A dead node's user is gone from the cluster: tell the room (every node).
    func clusterLeft(room: String, user: String) {
        announce(.presenceLeave, room: room, user: user, exclude: nil)
    }

    /// Restates this node's presence in Redis (after a Redis outage); users the cluster had
    /// lost are announced again.
    func restate() {
        registry.restate()
        let entries = rooms.allPresence()
        for room in Set(entries.map(\.room)) { broker.subscribe(.room(room)) }
        for user in Set(entries.map(\.user)) { broker.subscribe(.user(user)) }
        for e in entries {
            // Restated as if new: the cluster may have lost it.
            let local = PresenceUpdate(before: 0, after: e.devices, presence: [])
            manager.update(room: e.room, user: e.user, local: local, on: homeLoop).whenSuccess { update in
                if update.becamePresent { self.announce(.presenceJoin, room: e.room, user: e.user, exclude: nil) }
            }
        }
        removeStale()
    }

    /// Takes out what the store still holds of this node but the node no longer has: members
    /// who left while Redis could not be told (a partition, an outage short of the dead-node
    /// sweep). Each is checked against this node's rooms when the store answers, so a member
    /// who joined again meanwhile stays; a later join's update is sent after this one.
    private func removeStale() {
        manager.storedEntries(on: homeLoop).whenSuccess { stored in
            for entry in stored where !self.rooms.presence(room: entry.room).contains(where: { $0.user == entry.user }) {
                let local = PresenceUpdate(before: entry.devices, after: 0, presence: [])
                self.manager.update(room: entry.room, user: entry.user, local: local, on: self.homeLoop).whenSuccess { update in
                    if update.leftPresence { self.announce(.presenceLeave, room: entry.room, user: entry.user, exclude: nil) }
                }
            }
        }
    }

    private func announce(_ event: ServerEvent, room: String, user: String, exclude: ConnectionID?) {
        let payload = JSONValue.object([("room", .string(room)), ("user", .string(user)), ("from", .string(user)), ("ts", .int(clock.wallMs()))])
        let policy = event.policy
        publisher.publish(room: room, event: policy, payload: payload, excludeConnection: exclude, coalescingKey: policy.coalescingKey(room: room, user: user))
    }

    // MARK: Queries

    /// The room's presence: cluster-wide when Redis is up, this node's otherwise.
    func presence(room: String, on loop: any EventLoop) -> EventLoopFuture<[PresenceEntry]> {
        manager.presence(room: room, local: rooms.presence(room: room), on: loop)
    }

    /// The room's presence (devices per user), saying whether it is only this node's.
    func roomPresenceAnswer(room: String, on loop: any EventLoop) -> EventLoopFuture<PresenceAnswer<[PresenceEntry]>> {
        manager.roomPresence(room: room, local: rooms.presence(room: room), on: loop)
    }

    /// The users' presence, in `users`' order: cluster-wide when the node is in a cluster and
    /// Redis is up, this node's otherwise (`degraded` in a cluster).
    func userPresence(_ users: [String], withRooms: Bool, on loop: any EventLoop) -> EventLoopFuture<PresenceAnswer<[UserPresence]>> {
        directory.users(localUsers(users, withRooms: withRooms), withRooms: withRooms, on: loop)
    }

    /// This node's view of `users` (their rooms too when `withRooms`).
    private func localUsers(_ users: [String], withRooms: Bool) -> [UserPresence] {
        let now = clock.wallMs()
        return users.map { user in
            let (connections, departing, lastSeen) = registry.lookUp(user, now: now)
            var joined: [String] = []
            if withRooms {
                var all = Set<String>()
                for c in connections { all.formUnion(rooms.rooms(of: c)) }
                joined = all.sorted()
            }
            // A user within the presence grace is still online: its dropped device counts.
            return UserPresence(user: user, devices: connections.count + (departing && connections.isEmpty ? 1 : 0), rooms: joined, lastSeen: lastSeen)
        }
    }
}
