/// The rooms each connection is in, and the limit on how many.
///
/// Kept apart from the rooms themselves (`RoomRegistry`) because the server splits rooms over
/// lock stripes by name: the stripe of one room cannot see a connection's other rooms, so the
/// per-connection limit is checked here, in the connection's own stripe, before the room's
/// stripe is asked.
public struct ConnectionRooms: Sendable {
    /// The connection is already in as many rooms as allowed.
    public struct TooManyRooms: Error, Equatable, Sendable {
        public var limit: Int
    }

    public var maxRoomsPerConnection: Int
    private var rooms: [ConnectionID: Set<String>] = [:]

    public init(maxRoomsPerConnection: Int = 100) {
        self.maxRoomsPerConnection = maxRoomsPerConnection
    }

    /// Records that `connection` joins `room`. `false` when it was already in it (nothing
    /// changed); throws when it is in `maxRoomsPerConnection` rooms already.
    public mutating func reserve(_ room: String, for connection: ConnectionID) throws(TooManyRooms) -> Bool {
        let current = rooms[connection]
        if current?.contains(room) == true { return false }
        guard (current?.count ?? 0) < maxRoomsPerConnection else { throw TooManyRooms(limit: maxRoomsPerConnection) }
        rooms[connection, default: []].insert(room)
        return true
    }

    /// Records that `connection` left `room` (or that its join failed).
    public mutating func release(_ room: String, for connection: ConnectionID) {
        guard var set = rooms[connection] else { return }
        set.remove(room)
        rooms[connection] = set.isEmpty ? nil : set
    }

    /// Forgets the connection (disconnect); its rooms in name order.
    public mutating func removeAll(for connection: ConnectionID) -> [String] {
        (rooms.removeValue(forKey: connection) ?? []).sorted()
    }

    public func rooms(of connection: ConnectionID) -> Set<String> {
        rooms[connection] ?? []
    }

    public func contains(_ room: String, for connection: ConnectionID) -> Bool {
        rooms[connection]?.contains(room) == true
    }

    /// Connections in at least one room.
    public var connectionCount: Int { rooms.count }
}
