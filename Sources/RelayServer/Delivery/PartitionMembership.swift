import RelayCore

/// Who lives on one event loop: its connections, and their rooms and users there. Kept by the
/// loop's `LoopPartition` and touched only on that loop.
struct PartitionMembership {
    private(set) var connections: [ConnectionID: any ConnectionSink] = [:]
    private(set) var rooms: [String: RoomMembers] = [:]
    /// A user's sockets on this loop (usually one, kept inline).
    private(set) var users: [String: ConnectionMap<any ConnectionSink>] = [:]
    private(set) var userOf: [ConnectionID: String] = [:]

    mutating func add(_ sink: any ConnectionSink, user: String) {
        connections[sink.connectionID] = sink
        users[user, default: ConnectionMap()].set(sink.connectionID, sink)
        userOf[sink.connectionID] = user
    }

    mutating func remove(_ id: ConnectionID) {
        connections.removeValue(forKey: id)
        if let user = userOf.removeValue(forKey: id) {
            users[user]?.remove(id)
            if users[user]?.isEmpty == true { users.removeValue(forKey: user) }
        }
    }

    mutating func join(room: String, _ sink: any ConnectionSink) {
        rooms[room, default: RoomMembers()].insert(sink)
    }

    mutating func leave(room: String, _ id: ConnectionID) {
        rooms[room]?.remove(id)
        if rooms[room]?.isEmpty == true { rooms.removeValue(forKey: room) }
    }
}
