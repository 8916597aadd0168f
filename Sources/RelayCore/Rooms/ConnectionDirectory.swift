/// Who is connected: connections per user (for events addressed to a user's devices) with the
/// partition each lives on, plus the per-user connection limit. (The node-wide limit is counted
/// once, on an atomic, by the server's connection registry: a directory sees one stripe of users.)
public struct ConnectionDirectory: Sendable {
    public enum RegisterError: Error, Equatable, Sendable {
        case tooManyForUser(limit: Int)
    }

    public var maxConnectionsPerUser: Int
    private var byUser: [String: ConnectionMap<Int>] = [:]
    /// Connections in all. (No map from a connection back to its user: every caller knows the
    /// user, and a second table would cost every socket one more dictionary entry.)
    public private(set) var count = 0

    public init(maxConnectionsPerUser: Int) {
        self.maxConnectionsPerUser = maxConnectionsPerUser
    }

    public var userCount: Int { byUser.count }

    public mutating func register(_ connection: ConnectionID, user: String, partition: Int) throws(RegisterError) {
        // Read without keeping a copy of the user's map (it is changed in place below).
        let (existing, known) = byUser[user].map { ($0.count, $0[connection] != nil) } ?? (0, false)
        guard existing < maxConnectionsPerUser else { throw .tooManyForUser(limit: maxConnectionsPerUser) }
        if !known { count += 1 }
        byUser[user, default: ConnectionMap()].set(connection, partition)
    }

    /// Forgets `connection` of `user`; `false` when it was not registered as theirs.
    @discardableResult
    public mutating func unregister(_ connection: ConnectionID, user: String) -> Bool {
        guard byUser[user]?[connection] != nil else { return false }
        byUser[user]?.remove(connection)
        if byUser[user]?.isEmpty == true { byUser.removeValue(forKey: user) }
        count -= 1
        return true
    }

    /// Whether `connection` is registered as `user`'s.
    public func contains(_ connection: ConnectionID, user: String) -> Bool {
        byUser[user]?[connection] != nil
    }

    public func connections(of user: String) -> [ConnectionID] {
        (byUser[user]?.keys ?? []).sorted()
    }

    /// How many connections each connected user has.
    public func connectionCounts() -> [String: Int] {
        byUser.mapValues(\.count)
    }

    /// Partitions holding at least one of the user's connections, ascending.
    public func partitions(of user: String) -> [Int] {
        guard let conns = byUser[user] else { return [] }
        return Set(conns.values).sorted()
    }
}
