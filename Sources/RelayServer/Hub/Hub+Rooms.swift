import Logging
import NIOConcurrencyHelpers
import NIOCore
import RelayCore

/// Rooms and presence, on one node and across nodes.
extension Hub {
    // MARK: Rooms and presence

    /// Joins a room; the future (on `loop`) gives the presence list, the joiner included —
    /// cluster-wide when the node is in a cluster and Redis is up, this node's otherwise.
    public func join(room: String, sink: any ConnectionSink, user: String, on shard: LoopShard) throws(RelayError) -> EventLoopFuture<[PresenceEntry]> {
        let id = sink.connectionID
        let connection = connectionShards.shard(for: id)
        let reserved: Bool
        do throws(ConnectionRooms.TooManyRooms) {
            reserved = try connection.withLock { c throws(ConnectionRooms.TooManyRooms) in try c.rooms.reserve(room, for: id) }
        } catch {
            throw RelayError(.tooManyRooms, "at most \(error.limit) rooms per connection")
        }
        let joined: RoomRegistry.JoinResult
        let local: PresenceUpdate
        do throws(RoomRegistry.JoinError) {
            (joined, local) = try roomShards.shard(for: room).withLock { s throws(RoomRegistry.JoinError) in
                let r = try s.rooms.join(room: room, connection: id, user: user, partition: shard.index)
                let first = !r.alreadyMember && s.rooms.memberCount(room: room) == 1
                if first {
                    broker.subscribe(.room(room))
                    webhooks?.roomOccupancy(room, present: true)
                }
                let devices = s.rooms.devices(room: room, user: user)
                return (r, PresenceUpdate(before: r.alreadyMember ? devices : devices - 1, after: devices, presence: s.rooms.presence(room: room)))
            }
        } catch {
            if reserved { connection.withLockedValue { $0.rooms.release(room, for: id) } }
            switch error {
            case .roomFull(let limit): throw RelayError(.roomFull, "room is full (\(limit) members)")
            }
        }
        shard.join(room: room, sink)
        let loop = shard.eventLoop
        if joined.alreadyMember { return presence(room: room, on: loop) }
        let exclude = sink.connectionID
        return presenceManager.update(room: room, user: user, local: local, on: loop).map { update in
            if update.becamePresent {
                self.broadcastPresence("presence:join", room: room, user: user, ts: self.clock.wallMs(), exclude: exclude)
            }
            return update.presence
        }
    }

    /// After a connection left a room on this node: presence (cluster-wide when there is one).
    func presenceLeft(_ leave: RoomRegistry.LeaveResult, exclude: ConnectionID?, on loop: any EventLoop) {
        let devices = roomShards.shard(for: leave.room).withLockedValue { s in s.rooms.devices(room: leave.room, user: leave.user) }
        let local = PresenceUpdate(before: devices + 1, after: devices, presence: [])
        presenceManager.update(room: leave.room, user: leave.user, local: local, on: loop).whenSuccess { update in
            if update.leftPresence {
                self.broadcastPresence("presence:leave", room: leave.room, user: leave.user, ts: self.clock.wallMs(), exclude: exclude)
            }
        }
    }

    /// Restates this node's presence in Redis (after a Redis outage); users the cluster had
    /// lost are announced again.
    func republishPresence() {
        restateDirectory()
        let entries = roomShards.map { $0.rooms.allPresence() }.flatMap { $0 }
        let rooms = Set(entries.map(\.room))
        for room in rooms { broker.subscribe(.room(room)) }
        for user in Set(entries.map(\.user)) { broker.subscribe(.user(user)) }
        let loop = shards[0].eventLoop
        for e in entries {
            // Restated as if new: the cluster may have lost it.
            let local = PresenceUpdate(before: 0, after: e.devices, presence: [])
            presenceManager.update(room: e.room, user: e.user, local: local, on: loop).whenSuccess { update in
                if update.becamePresent {
                    self.broadcastPresence("presence:join", room: e.room, user: e.user, ts: self.clock.wallMs(), exclude: nil)
                }
            }
        }
    }

    /// A dead node's user is gone from the cluster: tell the room (every node).
    func announceClusterLeave(room: String, user: String) {
        broadcastPresence("presence:leave", room: room, user: user, ts: clock.wallMs(), exclude: nil)
    }

    /// Leaves a room; `false` if the connection was not in it.
    public func leave(room: String, connection id: ConnectionID, on shard: LoopShard) -> Bool {
        let now = clock.monotonicMs()
        guard let (left, deadline) = leaveRoomShard(room, connection: id, now: now) else { return false }
        connectionShards.shard(for: id).withLockedValue { $0.rooms.release(room, for: id) }
        let ended = locations.withLockedValue { $0.connectionLeft(id, room: room) }
        shard.leave(room: room, id)
        if let deadline { typingTimer.schedule(at: deadline) }
        let ts = clock.wallMs()
        presenceLeft(left, exclude: id, on: shard.eventLoop)
        for key in ended {
            let payload = JSONValue.object([("room", .string(key.room)), ("from", .string(key.user)), ("ts", .int(ts)), ("reason", "left")])
            publish(room: key.room, name: "location:stop", payload: payload, excludeConnection: id)
        }
        return true
    }

    /// Takes a connection out of a room in the room's shard: stops its typing there and, when
    /// the room is left empty, unsubscribes from it. `nil` if it was not a member; else the
    /// leave and the shard's next typing deadline.
    func leaveRoomShard(_ room: String, connection id: ConnectionID, now: Int64) -> (RoomRegistry.LeaveResult, Int64?)? {
        roomShards.shard(for: room).withLockedValue { s in
            guard let left = s.rooms.leave(room: room, connection: id) else { return nil }
            s.typing.connectionLeft(id, room: room, now: now)
            if s.rooms.memberCount(room: room) == 0 {
                broker.unsubscribe(.room(room))
                webhooks?.roomOccupancy(room, present: false)
            }
            return (left, s.typing.nextDeadline)
        }
    }

    /// The rooms a connection is in.
    public func rooms(of connection: ConnectionID) -> Set<String> {
        connectionShards.shard(for: connection).withLockedValue { $0.rooms.rooms(of: connection) }
    }

    /// Read from the connection's shard (not the room's): the check before each event a
    /// socket sends contends only with sockets whose ids share the shard.
    public func isMember(room: String, connection: ConnectionID) -> Bool {
        connectionShards.shard(for: connection).withLockedValue { $0.rooms.contains(room, for: connection) }
    }

    /// This node's presence in the room.
    public func presence(room: String) -> [PresenceEntry] {
        roomShards.shard(for: room).withLockedValue { $0.rooms.presence(room: room) }
    }

    /// The room's presence: cluster-wide when Redis is up, this node's otherwise.
    public func presence(room: String, on loop: any EventLoop) -> EventLoopFuture<[PresenceEntry]> {
        presenceManager.presence(room: room, local: presence(room: room), on: loop)
    }

    func broadcastPresence(_ name: String, room: String, user: String, ts: Int64, exclude: ConnectionID?) {
        let payload = JSONValue.object([("room", .string(room)), ("user", .string(user)), ("from", .string(user)), ("ts", .int(ts))])
        let key = Self.coalesceKey(name, room: room, user: user)
        publish(room: room, name: name, payload: payload, excludeConnection: exclude, coalesceKey: key)
    }
}
