/// Who is connected: connections per user (for events addressed to a user's devices) with the
/// partition each lives on, plus the per-user connection limit. (The node-wide limit is counted
/// once, on an atomic, by the server's connection registry: a directory sees one stripe of users.)
public struct ConnectionDirectory: Sendable {
    public enum RegisterError: Error, Equatable, Sendable {
        case tooManyForUser(limit: Int)
    }

    public var maxConnectionsPerUser: Int
    private var byUser: [String: ConnectionMap<Int>] = [:]
    private var users: [ConnectionID: String] = [:]

    public init(maxConnectionsPerUser: Int = 20) {
        self.maxConnectionsPerUser = maxConnectionsPerUser
    }

    public var count: Int { users.count }
    public var userCount: Int { byUser.count }

    public mutating func register(_ connection: ConnectionID, user: String, partition: Int) throws(RegisterError) {
        guard (byUser[user]?.count ?? 0) < maxConnectionsPerUser else { throw .tooManyForUser(limit: maxConnectionsPerUser) }
        byUser[user, default: ConnectionMap()].set(connection, partition)
        users[connection] = user
    }

    public mutating func unregister(_ connection: ConnectionID) {
        guard let user = users.removeValue(forKey: connection) else { return }
        byUser[user]?.remove(connection)
        if byUser[user]?.isEmpty == true { byUser.removeValue(forKey: user) }
    }

    public func user(of connection: ConnectionID) -> String? { users[connection] }

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
