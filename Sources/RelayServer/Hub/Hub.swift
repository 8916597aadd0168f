import Logging
import NIOConcurrencyHelpers
import NIOCore
import RelayCore
import Atomics

/// The relay's shared state and its fan-out.
///
/// Shared state is split by key over shards, each behind its own lock (as Centrifuge's hub
/// does), and only ever touched for short, in-memory updates (never across I/O): rooms
/// (members, presence, typing) by room name, connections (their rooms, admin info) by id,
/// users (their connections, last seen) by user id, socket and session ids by id. No lock
/// covers the whole hub: two operations contend only when their keys share a shard.
/// Delivery goes through the per-loop `LoopShard`s: an event is encoded once, then each loop
/// that holds recipients is visited once — inline for the caller's own loop, one `execute` for
/// any other.
public final class Hub: Sendable {
    /// How many locks each kind of state is split over by default (Centrifuge's hub: 64).
    public static let defaultLockShards = 64

    public let shards: [LoopShard]
    public let clock: RelayClock
    public let metrics: RelayMetrics
    let configuration: RelayConfiguration
    let logger: Logger
    /// Users by id: their connections and loops, when they were last seen.
    let userShards: LockShards<UserShard>
    /// Connected sockets on this node (the `maxConnections` limit, checked without a lock).
    let connectionTotal = ManagedAtomic<Int>(0)
    /// The private session ids (`pid`) of live sockets that take offsets, and where they are.
    let pidShards: LockShards<[String: (ConnectionID, Int)]>
    /// Rooms by name: members, presence, typing windows.
    let roomShards: LockShards<RoomShard>
    /// Connections by id: their rooms, what the admin API shows.
    let connectionShards: LockShards<ConnectionShard>
    /// Public socket ids (`sid`) by sid: the connection and its loop.
    let sidShards: LockShards<[String: (ConnectionID, Int)]>
    /// Live-location shares: their own lock (the per-connection limit spans rooms).
    let locations: NIOLockedValueBox<LiveLocationSessions>
    /// Connected clients that negotiated permessage-deflate.
    let deflateClients = ManagedAtomic<Int>(0)
    /// Connected clients that take offsets (connection state recovery), and those of them that
    /// negotiated permessage-deflate: the offset variant of a message is made (and compressed)
    /// only when there are any.
    let offsetClients = ManagedAtomic<Int>(0)
    let offsetDeflateClients = ManagedAtomic<Int>(0)
    private let shardByLoop: [ObjectIdentifier: Int]
    let typingTimer: DeadlineScheduler
    let locationTimer: DeadlineScheduler
    /// Coalesced backend emits waiting for their window to close (Hub+Coalesce).
    let coalescing = NIOLockedValueBox(EventCoalescer<CoalesceSlot, PendingEmit>())
    let coalesceTimer: DeadlineScheduler
    let deflaters = DeflaterPool()
    let lagTasks = NIOLockedValueBox<[RepeatedTask]>([])

    /// The link to the other nodes, when this node runs in a cluster (presence, liveness).
    public let cluster: ClusterBus?
    /// Every event goes out through the broker: memory on one node, Redis in a cluster.
    public let broker: any Broker
    /// Disconnected sessions kept for connection state recovery.
    public let sessions: any SessionStore
    /// Who is in each room: this node's view, or the cluster's.
    public let presenceManager: any PresenceManager
    /// Users whose older tokens the backend revoked.
    let revocations: NIOLockedValueBox<RevocationList>
    /// Signed webhooks (user online/offline, room occupied/vacated, allow-listed client events), when configured.
    public let webhooks: Webhooks?

    public init(
        eventLoops: [any EventLoop], configuration: RelayConfiguration, clock: RelayClock = .system, metrics: RelayMetrics = RelayMetrics(),
        cluster: ClusterBus? = nil, webhooks: Webhooks? = nil, logger: Logger = Logger(label: "relay.hub"),
        broker: (any Broker)? = nil, lockShards: Int = Hub.defaultLockShards
    ) {
        precondition(!eventLoops.isEmpty)
        // Rounded up to a power of two by `LockShards`; 1 is one lock per kind of state (the
        // lock benchmark compares it with the default).
        let lockShards = max(1, lockShards)
        self.metrics = metrics
        self.cluster = cluster
        self.revocations = NIOLockedValueBox(RevocationList(ttlSeconds: configuration.revocationTTLSeconds))
        self.webhooks = webhooks
        let limits = configuration.historyLimits
        // Each of a user's allowed connections may leave a session waiting and one more.
        let keptPerUser = max(8, 2 * configuration.maxConnectionsPerUser)
        if let cluster {
            self.broker = RedisBroker(bus: cluster, limits: limits, wallMs: clock.wallMs)
            self.sessions = RedisSessionStore(redis: cluster.redis, maxPerUser: keptPerUser)
            self.presenceManager = RedisPresenceManager(bus: cluster)
        } else {
            self.broker = broker ?? MemoryBroker(limits: limits, wallMs: clock.wallMs)
            self.sessions = MemorySessionStore(wallMs: clock.wallMs, maxPerUser: keptPerUser)
            self.presenceManager = MemoryPresenceManager()
        }
        self.shards = eventLoops.enumerated().map { LoopShard(index: $0.offset, eventLoop: $0.element, metrics: metrics) }
        self.shardByLoop = Dictionary(uniqueKeysWithValues: eventLoops.enumerated().map { (ObjectIdentifier($0.element), $0.offset) })
        self.clock = clock
        self.configuration = configuration
        self.logger = logger
        self.userShards = LockShards(count: lockShards) {
            UserShard(
                directory: ConnectionDirectory(maxConnectionsPerUser: configuration.maxConnectionsPerUser, maxConnections: .max),
                lastSeen: LastSeenBook(capacity: Self.lastSeenCapacity / lockShards))
        }
        self.pidShards = LockShards(count: lockShards) { [:] }
        self.roomShards = LockShards(count: lockShards) {
            RoomShard(
                rooms: RoomRegistry(maxMembersPerRoom: configuration.maxMembersPerRoom),
                typing: TypingDebouncer(windowMs: configuration.typingWindowMs, expiryMs: configuration.typingExpiryMs))
        }
        self.connectionShards = LockShards(count: lockShards) {
            ConnectionShard(rooms: ConnectionRooms(maxRoomsPerConnection: configuration.maxRoomsPerConnection))
        }
        self.sidShards = LockShards(count: lockShards) { [:] }
        self.locations = NIOLockedValueBox(LiveLocationSessions())
        self.typingTimer = DeadlineScheduler(eventLoop: eventLoops[0], now: clock.monotonicMs)
        self.locationTimer = DeadlineScheduler(eventLoop: eventLoops[0], now: clock.monotonicMs)
        self.coalesceTimer = DeadlineScheduler(eventLoop: eventLoops[0], now: clock.monotonicMs)
        cluster?.onRestatePresence = { [weak self] in
            self?.republishPresence()
            self?.loadRevocations()
        }
        self.broker.setControlHandler { [weak self] control in self?.received(control) }
        cluster?.onPresenceGone = { [weak self] room, user in self?.announceClusterLeave(room: room, user: user) }
        self.broker.setRemoteHandler { [weak self] stream, message, routing in self?.deliverFromCluster(stream, message, routing: routing) }
        typingTimer.setAction { [weak self] in self?.flushTyping() }
        locationTimer.setAction { [weak self] in self?.expireLocations() }
        coalesceTimer.setAction { [weak self] in self?.flushCoalesced() }
        // Quiet rooms' history expires too, not only when something is appended next to it.
        if let memory = self.broker as? MemoryBroker, limits.isEnabled {
            let every = TimeAmount.milliseconds(max(1_000, min(limits.maxAgeMs / 4, 10_000)))
            let task = eventLoops[0].scheduleRepeatedTask(initialDelay: every, delay: every) { [weak memory] _ in memory?.trimExpired() }
            lagTasks.withLockedValue { $0.append(task) }
        }
    }

    /// The shard of the loop a channel lives on.
    public func shard(for loop: any EventLoop) -> LoopShard {
        guard let i = shardByLoop[ObjectIdentifier(loop)] else {
            preconditionFailure("event loop is not served by this hub")
        }
        return shards[i]
    }

    /// Users whose last-seen time the node remembers, over all user shards.
    static let lastSeenCapacity = 1_000_000

    // MARK: Connections

    /// Registers an authenticated connection. Called on the connection's loop.
    public func register(_ sink: any ConnectionSink, sid: String, user: String, on shard: LoopShard, deflate: Bool = false, ip: String = "", takesOffsets: Bool = false) throws(RelayError) {
        let info = ConnectionInfo(sid: sid, user: user, ip: ip, connectedAtMs: clock.wallMs(), deflate: deflate, loop: shard.index)
        // The node-wide limit first, on an atomic: reserve a place, give it back if refused.
        let total = connectionTotal.wrappingIncrementThenLoad(ordering: .relaxed)
        guard total <= configuration.maxConnections else {
            connectionTotal.wrappingDecrement(ordering: .relaxed)
            throw RelayError(.tooManyConnections)
        }
        do throws(ConnectionDirectory.RegisterError) {
            try userShards.shard(for: user).withLock { s throws(ConnectionDirectory.RegisterError) in
                try s.directory.register(sink.connectionID, user: user, partition: shard.index)
                // Under the lock, so subscribe/unsubscribe reach Redis in membership order.
                let devices = s.directory.connections(of: user).count
                if devices == 1 {
                    broker.subscribe(.user(user))
                    webhooks?.userPresence(user, present: true)
                }
                // Under the lock too: a user's updates reach the directory in order.
                presenceManager.updateUser(user, devices: devices, disconnectedAt: nil)
            }
            metrics.connections.increment()
            sidShards.shard(for: sid).withLockedValue { $0[sid] = (sink.connectionID, shard.index) }
            connectionShards.shard(for: sink.connectionID).withLockedValue { $0.info[sink.connectionID] = info }
            if deflate { deflateClients.wrappingIncrement(ordering: .relaxed) }
            if takesOffsets {
                offsetClients.wrappingIncrement(ordering: .relaxed)
                if deflate { offsetDeflateClients.wrappingIncrement(ordering: .relaxed) }
            }
        } catch {
            connectionTotal.wrappingDecrement(ordering: .relaxed)
            switch error {
            case .tooManyForUser(let limit): throw RelayError(.tooManyConnections, "at most \(limit) connections per user")
            case .tooManyTotal: throw RelayError(.tooManyConnections)
            }
        }
        shard.add(sink, user: user)
    }

    /// Removes a connection: leaves its rooms (presence), stops its typing and live shares.
    /// Called on the connection's loop when it closes.
    public func unregister(_ id: ConnectionID, sid: String, user: String, on shard: LoopShard, deflate: Bool = false, takesOffsets: Bool = false) {
        let now = clock.monotonicMs()
        let wallNow = clock.wallMs()
        let wasRegistered = userShards.shard(for: user).withLockedValue { s in
            guard s.directory.user(of: id) != nil else { return false }
            s.directory.unregister(id)
            let devices = s.directory.connections(of: user).count
            if devices == 0 {
                broker.unsubscribe(.user(user))
                webhooks?.userPresence(user, present: false)
            }
            s.lastSeen.record(user, at: wallNow)
            presenceManager.updateUser(user, devices: devices, disconnectedAt: wallNow)
            return true
        }
        if wasRegistered { connectionTotal.wrappingDecrement(ordering: .relaxed) }
        if deflate { deflateClients.wrappingDecrement(ordering: .relaxed) }
        if takesOffsets {
            offsetClients.wrappingDecrement(ordering: .relaxed)
            if deflate { offsetDeflateClients.wrappingDecrement(ordering: .relaxed) }
        }
        sidShards.shard(for: sid).withLockedValue { sids in
            if sids[sid]?.0 == id { sids.removeValue(forKey: sid) }
        }
        let rooms = connectionShards.shard(for: id).withLockedValue { c in
            c.info.removeValue(forKey: id)
            return c.rooms.removeAll(for: id)
        }
        // Only the shards of the connection's own rooms, one at a time.
        var leaves: [RoomRegistry.LeaveResult] = []
        var typingDeadline: Int64?
        for room in rooms {
            guard let (leave, deadline) = leaveRoomShard(room, connection: id, now: now) else { continue }
            leaves.append(leave)
            if let deadline { typingDeadline = min(typingDeadline ?? deadline, deadline) }
        }
        let endedShares = locations.withLockedValue { $0.connectionClosed(id) }
        for leave in leaves { shard.leave(room: leave.room, id) }
        shard.remove(id)
        metrics.connections.decrement()
        if let typingDeadline { typingTimer.schedule(at: typingDeadline) }
        let ts = clock.wallMs()
        for leave in leaves { presenceLeft(leave, exclude: nil, on: shard.eventLoop) }
        for key in endedShares {
            let payload = JSONValue.object([("room", .string(key.room)), ("from", .string(key.user)), ("ts", .int(ts)), ("reason", "disconnected")])
            publish(room: key.room, name: "location:stop", payload: payload, excludeConnection: id)
        }
    }

    public var connectionCount: Int { connectionTotal.load(ordering: .relaxed) }
    public var roomCount: Int { roomShards.map { $0.rooms.roomCount }.reduce(0, +) }

}
