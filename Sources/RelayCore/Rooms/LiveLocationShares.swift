/// Live location shares: a user shares in a room for a duration; updates are accepted only
/// inside a live share, and a share ends at its duration (or on stop, or when its connection
/// closes). Time is passed in milliseconds.
public struct LiveLocationShares: Sendable {
    public struct Key: Hashable, Sendable, Comparable {
        public var room: String
        public var user: String
        public init(room: String, user: String) {
            self.room = room
            self.user = user
        }
        public static func < (a: Key, b: Key) -> Bool { (a.room, a.user) < (b.room, b.user) }
    }

    struct Share: Sendable {
        var expiresAt: Int64
        var connection: ConnectionID
    }

    private var shares: [Key: Share] = [:]
    /// Each connection's shares (at most `maxSharesPerConnection`): a disconnect, a room left or
    /// a new share looks at the connection's few keys, not at every share on the node.
    private var byConnection: [ConnectionID: [Key]] = [:]
    public var maxSharesPerConnection: Int

    public init(maxSharesPerConnection: Int) {
        self.maxSharesPerConnection = maxSharesPerConnection
    }

    public var count: Int { shares.count }

    /// Starts or extends a share. Returns the expiry time.
    @discardableResult
    public mutating func start(room: String, user: String, connection: ConnectionID, durationSec: Int64, now: Int64) throws(RelayError) -> Int64 {
        let key = Key(room: room, user: user)
        // Expired shares not yet collected by `expire(now:)` do not count against the limit.
        let live = byConnection[connection, default: []].count { shares[$0].map { $0.expiresAt > now } ?? false }
        if shares[key] == nil, live >= maxSharesPerConnection {
            throw RelayError(.rateLimited, "too many live shares on this connection")
        }
        let expires = now + durationSec * 1000
        // The same user's share in the room may move to another of their connections.
        if let old = shares[key], old.connection != connection { unindex(key, from: old.connection) }
        if shares[key]?.connection != connection { byConnection[connection, default: []].append(key) }
        shares[key] = Share(expiresAt: expires, connection: connection)
        return expires
    }

    /// Checks an update is inside a live share.
    public func checkUpdate(room: String, user: String, now: Int64) throws(RelayError) {
        guard let share = shares[Key(room: room, user: user)], share.expiresAt > now else { throw RelayError(.noLiveShare) }
    }

    /// Ends a share; `false` if there was none.
    @discardableResult
    public mutating func stop(room: String, user: String) -> Bool {
        remove(Key(room: room, user: user))
    }

    /// Ends and returns the shares a connection started (it disconnected), sorted.
    public mutating func connectionClosed(_ connection: ConnectionID) -> [Key] {
        guard let keys = byConnection.removeValue(forKey: connection) else { return [] }
        for k in keys { shares.removeValue(forKey: k) }
        return keys.sorted()
    }

    /// Ends and returns the share of `connection` in `room`, if any (it left the room).
    public mutating func connectionLeft(_ connection: ConnectionID, room: String) -> [Key] {
        let keys = (byConnection[connection] ?? []).filter { $0.room == room }.sorted()
        for k in keys { remove(k) }
        return keys
    }

    /// Ends and returns the shares whose time is up, sorted.
    public mutating func expire(now: Int64) -> [Key] {
        let keys = shares.filter { $0.value.expiresAt <= now }.map(\.key).sorted()
        for k in keys { remove(k) }
        return keys
    }

    /// Removes one share and its index entry; `false` if there was none.
    @discardableResult
    private mutating func remove(_ key: Key) -> Bool {
        guard let share = shares.removeValue(forKey: key) else { return false }
        unindex(key, from: share.connection)
        return true
    }

    private mutating func unindex(_ key: Key, from connection: ConnectionID) {
        guard var keys = byConnection[connection] else { return }
        keys.removeAll { $0 == key }
        byConnection[connection] = keys.isEmpty ? nil : keys
    }

    public var nextDeadline: Int64? { shares.values.map(\.expiresAt).min() }
}
