import Atomics
import NIOConcurrencyHelpers
import RelayBackends
import RelayCore

/// Who is connected to this node: each user's connections and the event loops they live on,
/// public socket ids, what the admin API shows of a connection, the node-wide total and the
/// clients that negotiated deflate or take offsets.
///
/// Users, sids and connection infos are each striped by key over their own locks; the total and
/// the client counts are atomics. A user's first connect and last disconnect subscribe and
/// unsubscribe the node to the user's stream and tell the presence manager and the webhooks,
/// under the user's stripe, so they reach Redis and the backend in the order they happened.
final class ConnectionRegistry: Sendable {
    /// Users by id: their connections and loops, when they were last seen.
    let users: LockStripes<UserStripe>
    /// Public socket ids (`sid`): the connection and its loop.
    private let sids: LockStripes<[String: (ConnectionID, Int)]>
    /// What the admin API shows of each connection.
    private let infos: LockStripes<[ConnectionID: ConnectionInfo]>
    private let total = ManagedAtomic<Int>(0)
    private let maxConnections: Int
    let clients = ClientCounts()
    private let broker: any Broker
    private let directory: any UserDirectory
    private let webhooks: Webhooks?

    /// Users whose last-seen time the node remembers, over all stripes.
    static let lastSeenCapacity = 1_000_000

    init(
        maxConnections: Int, maxConnectionsPerUser: Int, stripes: Int, broker: any Broker, directory: any UserDirectory,
        webhooks: Webhooks?
    ) {
        self.maxConnections = maxConnections
        self.broker = broker
        self.directory = directory
        self.webhooks = webhooks
        self.users = LockStripes(count: stripes) {
            UserStripe(
                directory: ConnectionDirectory(maxConnectionsPerUser: maxConnectionsPerUser),
                lastSeen: LastSeenBook(capacity: Self.lastSeenCapacity / max(1, stripes)))
        }
        self.sids = LockStripes(count: stripes) { [:] }
        self.infos = LockStripes(count: stripes) { [:] }
    }

    var connectionCount: Int { total.load(ordering: .relaxed) }
    var userCount: Int { users.map { $0.directory.userCount }.reduce(0, +) }

    /// Counts an authenticated connection in: the node's limit (an atomic reservation, given
    /// back when the user's own limit refuses), then the user's.
    func register(_ info: ConnectionInfo, id: ConnectionID, takesOffsets: Bool) throws(RelayError) {
        guard total.wrappingIncrementThenLoad(ordering: .relaxed) <= maxConnections else {
            total.wrappingDecrement(ordering: .relaxed)
            throw RelayError(.tooManyConnections)
        }
        do throws(ConnectionDirectory.RegisterError) {
            try users.stripe(for: info.user).withLock { s throws(ConnectionDirectory.RegisterError) in
                try s.directory.register(id, user: info.user, partition: info.loop)
                let devices = s.directory.connections(of: info.user).count
                // Back within the presence grace: nobody was told the user went.
                if devices == 1 && s.departing.removeValue(forKey: info.user) == nil {
                    broker.subscribe(.user(info.user))
                    webhooks?.userPresence(info.user, present: true)
                }
                directory.updateUser(info.user, devices: devices, disconnectedAt: nil)
            }
        } catch {
            total.wrappingDecrement(ordering: .relaxed)
            switch error {
            case .tooManyForUser(let limit): throw RelayError(.tooManyConnections, "at most \(limit) connections per user")
            }
        }
        sids.stripe(for: info.sid).withLockedValue { $0[info.sid] = (id, info.loop) }
        infos.stripe(for: id).withLockedValue { $0[id] = info }
        clients.add(deflate: info.deflate, takesOffsets: takesOffsets)
    }

    /// Counts a connection out; `false` when it was not registered. `wallNow` is its user's
    /// last-seen time. With `holdingUntil` (a drop within the presence grace), the user's last
    /// connection going leaves the user online until then (`endDeparture`).
    @discardableResult
    func unregister(_ id: ConnectionID, sid: String, user: String, deflate: Bool, takesOffsets: Bool, wallNow: Int64, holdingUntil: Int64? = nil) -> Bool {
        let wasRegistered = users.stripe(for: user).withLockedValue { s in
            guard s.directory.unregister(id, user: user) else { return false }
            let devices = s.directory.connections(of: user).count
            s.lastSeen.record(user, at: wallNow)
            if devices == 0, let until = holdingUntil {
                s.departing[user] = UserStripe.Departing(until: until, at: wallNow)
                return true
            }
            if devices == 0 {
                broker.unsubscribe(.user(user))
                webhooks?.userPresence(user, present: false)
            }
            directory.updateUser(user, devices: devices, disconnectedAt: wallNow)
            return true
        }
        guard wasRegistered else { return false }
        total.wrappingDecrement(ordering: .relaxed)
        clients.remove(deflate: deflate, takesOffsets: takesOffsets)
        sids.stripe(for: sid).withLockedValue { sids in
            if sids[sid]?.0 == id { sids.removeValue(forKey: sid) }
        }
        infos.stripe(for: id).withLockedValue { _ = $0.removeValue(forKey: id) }
        return true
    }

    /// The user's departure is due at `now`: if the user did not connect again, it is offline
    /// from now on (the stream unsubscribed, the webhooks and the store told, as a disconnect
    /// at the time the last connection dropped).
    func endDeparture(_ user: String, now: Int64) {
        users.stripe(for: user).withLockedValue { s in
            guard let departing = s.departing[user], departing.until <= now, s.directory.connections(of: user).isEmpty else { return }
            s.departing[user] = nil
            broker.unsubscribe(.user(user))
            webhooks?.userPresence(user, present: false)
            directory.updateUser(user, devices: 0, disconnectedAt: departing.at)
        }
    }

    /// The public socket id of a connection on this node.
    func sid(of connection: ConnectionID) -> String? {
        infos.stripe(for: connection).withLockedValue { $0[connection]?.sid }
    }

    /// Where a public `sid` lives: the connection and its loop's index.
    func locate(sid: String) -> (ConnectionID, Int)? {
        sids.stripe(for: sid).withLockedValue { $0[sid] }
    }

    func info(of connection: ConnectionID) -> ConnectionInfo? {
        infos.stripe(for: connection).withLockedValue { $0[connection] }
    }

    /// A user's connections on this node and the loops they live on.
    func connections(of user: String) -> (ids: [ConnectionID], partitions: [Int]) {
        users.stripe(for: user).withLockedValue { s in (s.directory.connections(of: user), s.directory.partitions(of: user)) }
    }

    /// A user's connections, whether the user is still online within the presence grace with
    /// none, and when the user was last seen here.
    func lookUp(_ user: String, now: Int64) -> (ids: [ConnectionID], departing: Bool, lastSeen: Int64?) {
        users.stripe(for: user).withLockedValue { s in
            (s.directory.connections(of: user), s.departing[user] != nil, s.lastSeen.lastSeen(user, now: now))
        }
    }

    /// States this node's sockets per user again (Redis came back). Under every user stripe's
    /// lock at once (taken in index order; nothing else holds two), so the restatement — which
    /// replaces the node's whole set in Redis — is ordered with the connects and disconnects
    /// around it. Rare: once per Redis recovery.
    func restate() {
        var counts: [String: Int] = [:]
        func lock(from index: Int) {
            guard index < users.boxes.count else { return directory.restateUsers(counts) }
            users.boxes[index].withLockedValue { s in
                counts.merge(s.directory.connectionCounts()) { a, _ in a }
                // Within the grace a departing user is still online.
                for user in s.departing.keys where counts[user] == nil { counts[user] = 1 }
                lock(from: index + 1)
            }
        }
        lock(from: 0)
    }
}
