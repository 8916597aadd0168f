import Logging
import NIOConcurrencyHelpers
import NIOCore
import RelayCore

/// The relay's shared state and its fan-out.
///
/// Membership, presence, typing and live-location state live behind one lock and are only
/// ever touched for short, in-memory updates (never across I/O). Delivery goes through the
/// per-loop `LoopShard`s: an event is encoded once, then each loop that holds recipients is
/// visited once — inline for the caller's own loop, one `execute` for any other.
public final class Hub: Sendable {
    struct State: Sendable {
        var rooms: RoomRegistry
        var directory: ConnectionDirectory
        var typing: TypingDebouncer
        var locations: LiveLocationSessions
        var sids: [String: (ConnectionID, Int)] = [:]
        /// Connected clients that negotiated permessage-deflate.
        var deflateClients = 0
        /// What the admin API shows of each connection.
        var info: [ConnectionID: ConnectionInfo] = [:]
    }

    public let shards: [LoopShard]
    public let clock: RelayClock
    public let metrics: RelayMetrics
    let configuration: RelayConfiguration
    let logger: Logger
    private let state: NIOLockedValueBox<State>
    private let shardByLoop: [ObjectIdentifier: Int]
    private let typingTimer: DeadlineScheduler
    private let locationTimer: DeadlineScheduler
    private let deflaters = DeflaterPool()

    /// The link to the other nodes, when this node runs in a cluster.
    public let cluster: ClusterBus?

    public init(eventLoops: [any EventLoop], configuration: RelayConfiguration, clock: RelayClock = .system, metrics: RelayMetrics = RelayMetrics(), cluster: ClusterBus? = nil, logger: Logger = Logger(label: "relay.hub")) {
        precondition(!eventLoops.isEmpty)
        self.metrics = metrics
        self.cluster = cluster
        self.shards = eventLoops.enumerated().map { LoopShard(index: $0.offset, eventLoop: $0.element, metrics: metrics) }
        self.shardByLoop = Dictionary(uniqueKeysWithValues: eventLoops.enumerated().map { (ObjectIdentifier($0.element), $0.offset) })
        self.clock = clock
        self.configuration = configuration
        self.logger = logger
        self.state = NIOLockedValueBox(
            State(
                rooms: RoomRegistry(maxRoomsPerConnection: configuration.maxRoomsPerConnection, maxMembersPerRoom: configuration.maxMembersPerRoom),
                directory: ConnectionDirectory(maxConnectionsPerUser: configuration.maxConnectionsPerUser, maxConnections: configuration.maxConnections),
                typing: TypingDebouncer(windowMs: configuration.typingWindowMs, expiryMs: configuration.typingExpiryMs),
                locations: LiveLocationSessions()
            ))
        self.typingTimer = DeadlineScheduler(eventLoop: eventLoops[0], now: clock.monotonicMs)
        self.locationTimer = DeadlineScheduler(eventLoop: eventLoops[0], now: clock.monotonicMs)
        cluster?.hub = self
        typingTimer.setAction { [weak self] in self?.flushTyping() }
        locationTimer.setAction { [weak self] in self?.expireLocations() }
    }

    /// The shard of the loop a channel lives on.
    public func shard(for loop: any EventLoop) -> LoopShard {
        guard let i = shardByLoop[ObjectIdentifier(loop)] else {
            preconditionFailure("event loop is not served by this hub")
        }
        return shards[i]
    }

    // MARK: Connections

    /// Registers an authenticated connection. Called on the connection's loop.
    public func register(_ sink: any ConnectionSink, sid: String, user: String, on shard: LoopShard, deflate: Bool = false, ip: String = "") throws(RelayError) {
        let info = ConnectionInfo(sid: sid, user: user, ip: ip, connectedAtMs: clock.wallMs(), deflate: deflate, loop: shard.index)
        do throws(ConnectionDirectory.RegisterError) {
            try state.withLock { s throws(ConnectionDirectory.RegisterError) in
                try s.directory.register(sink.connectionID, user: user, partition: shard.index)
                s.sids[sid] = (sink.connectionID, shard.index)
                s.info[sink.connectionID] = info
                if deflate { s.deflateClients += 1 }
                // Under the lock, so subscribe/unsubscribe reach Redis in membership order.
                if s.directory.connections(of: user).count == 1 { cluster?.subscribe(user: user) }
            }
            metrics.connections.increment()
        } catch {
            switch error {
            case .tooManyForUser(let limit): throw RelayError(.tooManyConnections, "at most \(limit) connections per user")
            case .tooManyTotal: throw RelayError(.tooManyConnections)
            }
        }
        shard.add(sink, user: user)
    }

    /// Removes a connection: leaves its rooms (presence), stops its typing and live shares.
    /// Called on the connection's loop when it closes.
    public func unregister(_ id: ConnectionID, sid: String, user: String, on shard: LoopShard, deflate: Bool = false) {
        let now = clock.monotonicMs()
        let (leaves, endedShares, typingDeadline) = state.withLockedValue { s in
            s.directory.unregister(id)
            if deflate { s.deflateClients -= 1 }
            s.info.removeValue(forKey: id)
            s.sids.removeValue(forKey: sid)
            let leaves = s.rooms.leaveAll(connection: id)
            s.typing.connectionClosed(id, now: now)
            let ended = s.locations.connectionClosed(id)
            let last = s.directory.connections(of: user).isEmpty
            if last { cluster?.unsubscribe(user: user) }
            for leave in leaves where s.rooms.memberCount(room: leave.room) == 0 { cluster?.unsubscribe(room: leave.room) }
            return (leaves, ended, s.typing.nextDeadline)
        }
        for leave in leaves { shard.leave(room: leave.room, id) }
        shard.remove(id)
        metrics.connections.decrement()
        if let typingDeadline { typingTimer.schedule(at: typingDeadline) }
        let ts = clock.wallMs()
        for leave in leaves { presenceLeft(leave, exclude: nil) }
        for key in endedShares {
            let payload = JSONValue.object([("room", .string(key.room)), ("from", .string(key.user)), ("ts", .int(ts)), ("reason", "disconnected")])
            publish(room: key.room, name: "location:stop", payload: payload, excludeConnection: id)
        }
    }

    public var connectionCount: Int { state.withLockedValue { $0.directory.count } }
    public var roomCount: Int { state.withLockedValue { $0.rooms.roomCount } }

    // MARK: Rooms and presence

    /// Joins a room; the future (on `loop`) gives the presence list, the joiner included —
    /// cluster-wide when the node is in a cluster and Redis is up, this node's otherwise.
    public func join(room: String, sink: any ConnectionSink, user: String, on shard: LoopShard) throws(RelayError) -> EventLoopFuture<[PresenceEntry]> {
        let joined: RoomRegistry.JoinResult
        let presence: [PresenceEntry]
        let devices: Int
        do throws(RoomRegistry.JoinError) {
            (joined, presence, devices) = try state.withLock { s throws(RoomRegistry.JoinError) in
                let r = try s.rooms.join(room: room, connection: sink.connectionID, user: user, partition: shard.index)
                let first = !r.alreadyMember && s.rooms.memberCount(room: room) == 1
                if first { cluster?.subscribe(room: room) }
                return (r, s.rooms.presence(room: room), s.rooms.devices(room: room, user: user))
            }
        } catch {
            switch error {
            case .tooManyRooms(let limit): throw RelayError(.tooManyRooms, "at most \(limit) rooms per connection")
            case .roomFull(let limit): throw RelayError(.roomFull, "room is full (\(limit) members)")
            }
        }
        shard.join(room: room, sink)
        let loop = shard.eventLoop
        guard let cluster else {
            if joined.userBecamePresent {
                broadcastPresence("presence:join", room: room, user: user, ts: clock.wallMs(), exclude: sink.connectionID)
            }
            return loop.makeSucceededFuture(presence)
        }
        if joined.alreadyMember { return self.presence(room: room, on: loop) }
        let exclude = sink.connectionID
        guard cluster.isUp else {
            // Degraded: node-local presence.
            if joined.userBecamePresent { broadcastPresence("presence:join", room: room, user: user, ts: clock.wallMs(), exclude: exclude) }
            return loop.makeSucceededFuture(presence)
        }
        return cluster.updatePresence(room: room, user: user, devices: devices).map { update in
            if update.before == 0 && update.after > 0 {
                self.broadcastPresence("presence:join", room: room, user: user, ts: self.clock.wallMs(), exclude: exclude)
            }
            return update.presence
        }.recover { _ in
            if joined.userBecamePresent { self.broadcastPresence("presence:join", room: room, user: user, ts: self.clock.wallMs(), exclude: exclude) }
            return presence
        }.hop(to: loop)
    }

    /// After a connection left a room on this node: the room channel and cluster presence.
    private func presenceLeft(_ leave: RoomRegistry.LeaveResult, exclude: ConnectionID?) {
        guard let cluster else {
            if leave.userLeftPresence { broadcastPresence("presence:leave", room: leave.room, user: leave.user, ts: clock.wallMs(), exclude: exclude) }
            return
        }
        let devices = state.withLockedValue { s in s.rooms.devices(room: leave.room, user: leave.user) }
        guard cluster.isUp else {
            if leave.userLeftPresence { broadcastPresence("presence:leave", room: leave.room, user: leave.user, ts: clock.wallMs(), exclude: exclude) }
            return
        }
        cluster.updatePresence(room: leave.room, user: leave.user, devices: devices).whenComplete { result in
            switch result {
            case .success(let update):
                if update.before > 0 && update.after == 0 {
                    self.broadcastPresence("presence:leave", room: leave.room, user: leave.user, ts: self.clock.wallMs(), exclude: exclude)
                }
            case .failure:
                if leave.userLeftPresence { self.broadcastPresence("presence:leave", room: leave.room, user: leave.user, ts: self.clock.wallMs(), exclude: exclude) }
            }
        }
    }

    /// Restates this node's presence in Redis (after a Redis outage); users the cluster had
    /// lost are announced again.
    func republishPresence() {
        guard let cluster else { return }
        let entries = state.withLockedValue { $0.rooms.allPresence() }
        let rooms = Set(entries.map(\.room))
        for room in rooms { cluster.subscribe(room: room) }
        for user in Set(entries.map(\.user)) { cluster.subscribe(user: user) }
        for e in entries {
            cluster.updatePresence(room: e.room, user: e.user, devices: e.devices).whenSuccess { update in
                if update.before == 0 && update.after > 0 {
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
        let (left, ended, deadline) = state.withLockedValue { s in
            let left = s.rooms.leave(room: room, connection: id)
            if left != nil { s.typing.connectionLeft(id, room: room, now: now) }
            if left != nil, s.rooms.memberCount(room: room) == 0 { cluster?.unsubscribe(room: room) }
            let ended = left != nil ? s.locations.connectionLeft(id, room: room) : []
            return (left, ended, s.typing.nextDeadline)
        }
        guard let left else { return false }
        shard.leave(room: room, id)
        if let deadline { typingTimer.schedule(at: deadline) }
        let ts = clock.wallMs()
        presenceLeft(left, exclude: id)
        for key in ended {
            let payload = JSONValue.object([("room", .string(key.room)), ("from", .string(key.user)), ("ts", .int(ts)), ("reason", "left")])
            publish(room: key.room, name: "location:stop", payload: payload, excludeConnection: id)
        }
        return true
    }

    public func isMember(room: String, connection: ConnectionID) -> Bool {
        state.withLockedValue { $0.rooms.isMember(room: room, connection: connection) }
    }

    /// This node's presence in the room.
    public func presence(room: String) -> [PresenceEntry] {
        state.withLockedValue { $0.rooms.presence(room: room) }
    }

    /// The room's presence: cluster-wide when Redis is up, this node's otherwise.
    public func presence(room: String, on loop: any EventLoop) -> EventLoopFuture<[PresenceEntry]> {
        guard let cluster, cluster.isUp else { return loop.makeSucceededFuture(presence(room: room)) }
        let local = presence(room: room)
        return cluster.presence(room: room).recover { _ in local }.hop(to: loop)
    }

    private func broadcastPresence(_ name: String, room: String, user: String, ts: Int64, exclude: ConnectionID?) {
        let payload = JSONValue.object([("room", .string(room)), ("user", .string(user)), ("from", .string(user)), ("ts", .int(ts))])
        let key = OutboundQueue<OutboundMessage>.CoalesceKey(event: "presence", room: room, user: user)
        publish(room: room, name: name, payload: payload, excludeConnection: exclude, coalesceKey: key)
    }

    // MARK: Fan-out

    /// Encodes an event once and delivers it to the room. Returns the number of recipients
    /// (room members minus the excluded).
    @discardableResult
    public func publish(room: String, name: String, payload: JSONValue, excludeConnection: ConnectionID? = nil, excludeUser: String? = nil, coalesceKey: OutboundQueue<OutboundMessage>.CoalesceKey? = nil, durable: Bool = false) -> Int {
        let (partitions, others, deflateClients) = state.withLockedValue { s in
            let count = s.rooms.memberCount(room: room)
            let excluded = excludeConnection.map { s.rooms.isMember(room: room, connection: $0) } ?? false
            return (s.rooms.partitions(room: room), excluded ? count - 1 : count, s.deflateClients)
        }
        // Nobody else in the room (and no other node to tell): do not even encode.
        guard others > 0 || cluster != nil else { return 0 }
        let message = makeMessage(name, payload, coalesceKey: coalesceKey, durable: durable, deflateClients: deflateClients)
        deliver(room: room, message: message, partitions: partitions, excludeConnection: excludeConnection, excludeUser: excludeUser)
        cluster?.publish(room: room, message, excludeUser: excludeUser)
        return others
    }

    /// Encodes an event once; compresses it once too when deflate clients are connected and
    /// it is over the threshold.
    private func makeMessage(_ name: String, _ payload: JSONValue, coalesceKey: OutboundQueue<OutboundMessage>.CoalesceKey? = nil, durable: Bool = false, deflateClients: Int) -> OutboundMessage {
        var message = OutboundMessage(bytes: OutboundMessage.event(name, payload), coalesceKey: coalesceKey, durable: durable)
        message.label = RelayMetrics.label(for: name)
        message.createdAt = NIODeadline.now().uptimeNanoseconds
        if deflateClients > 0, message.bytes.readableBytes >= configuration.deflateThresholdBytes {
            message.compressed = deflaters.compress(message.bytes)
        }
        return message
    }

    /// One hop per partition: inline for the caller's loop, one `execute` for any other.
    private func deliver(room: String, message: OutboundMessage, partitions: [Int], excludeConnection: ConnectionID?, excludeUser: String?) {
        for p in partitions {
            let shard = shards[p]
            if shard.eventLoop.inEventLoop {
                shard.deliver(room: room, message, excludeConnection: excludeConnection, excludeUser: excludeUser)
            } else {
                shard.eventLoop.execute {
                    shard.deliver(room: room, message, excludeConnection: excludeConnection, excludeUser: excludeUser)
                }
            }
        }
    }

    /// Delivers an event to every connected device of `user`. Returns the number of sockets.
    @discardableResult
    public func publish(user: String, name: String, payload: JSONValue, durable: Bool = false) -> Int {
        let (partitions, count, deflateClients) = state.withLockedValue { s in
            (s.directory.partitions(of: user), s.directory.connections(of: user).count, s.deflateClients)
        }
        guard count > 0 || cluster != nil else { return 0 }
        let message = makeMessage(name, payload, durable: durable, deflateClients: deflateClients)
        cluster?.publish(user: user, message)
        for p in partitions {
            let shard = shards[p]
            if shard.eventLoop.inEventLoop {
                shard.deliver(user: user, message)
            } else {
                shard.eventLoop.execute { shard.deliver(user: user, message) }
            }
        }
        return count
    }

    /// Forwards a committed receipt to its room and to every device of the message's author,
    /// the author's devices outside the room included (each socket gets it once).
    public func publishReceipt(_ receipt: Receipt, excludeConnection: ConnectionID?) {
        let (roomPartitions, others, authorPartitions, deflateClients) = state.withLockedValue { s in
            let count = s.rooms.memberCount(room: receipt.room)
            let excluded = excludeConnection.map { s.rooms.isMember(room: receipt.room, connection: $0) } ?? false
            return (s.rooms.partitions(room: receipt.room), excluded ? count - 1 : count, s.directory.partitions(of: receipt.authorID), s.deflateClients)
        }
        // Nobody else in the room and the author offline (and no other node): nothing to encode.
        if authorPartitions.isEmpty && others == 0 && cluster == nil { return }
        let payload = receipt.json.setting("from", to: .string(receipt.userID))
        let message = makeMessage(receipt.kind.eventName, payload, durable: true, deflateClients: deflateClients)
        cluster?.publish(room: receipt.room, message, excludeUser: nil)
        cluster?.publish(user: receipt.authorID, message, skipMembersOf: receipt.room)
        for p in Set(roomPartitions).union(authorPartitions).sorted() {
            let shard = shards[p]
            let deliver: @Sendable () -> Void = {
                shard.deliver(room: receipt.room, message, excludeConnection: excludeConnection, excludeUser: nil)
                shard.deliver(user: receipt.authorID, message, skippingMembersOf: receipt.room, excludeConnection: excludeConnection)
            }
            if shard.eventLoop.inEventLoop { deliver() } else { shard.eventLoop.execute(deliver) }
        }
    }

    // MARK: From other nodes

    /// An event another node published to a room: deliver to this node's members.
    func deliverFromCluster(room: String, _ message: OutboundMessage, excludeUser: String?) {
        let partitions = state.withLockedValue { $0.rooms.partitions(room: room) }
        var message = message
        message.createdAt = NIODeadline.now().uptimeNanoseconds
        deliver(room: room, message: message, partitions: partitions, excludeConnection: nil, excludeUser: excludeUser)
    }

    /// An event another node published to a user: deliver to the user's sockets here.
    func deliverFromCluster(user: String, _ message: OutboundMessage, skipMembersOf room: String?) {
        let partitions = state.withLockedValue { $0.directory.partitions(of: user) }
        for p in partitions {
            let shard = shards[p]
            let deliver: @Sendable () -> Void = {
                if let room { shard.deliver(user: user, message, skippingMembersOf: room, excludeConnection: nil) } else { shard.deliver(user: user, message) }
            }
            if shard.eventLoop.inEventLoop { deliver() } else { shard.eventLoop.execute(deliver) }
        }
    }

    // MARK: Typing

    public func typing(_ isTyping: Bool, room: String, user: String, connection: ConnectionID) {
        let now = clock.monotonicMs()
        let deadline = state.withLockedValue { s in
            isTyping ? s.typing.start(room: room, user: user, connection: connection, now: now) : s.typing.stop(room: room, user: user, now: now)
        }
        if let deadline { typingTimer.schedule(at: deadline) }
    }

    /// Timer callback: flushes due typing windows to their rooms; returns the next deadline.
    private func flushTyping() -> Int64? {
        let now = clock.monotonicMs()
        let (changes, next) = state.withLockedValue { s in
            let changes = s.typing.flush(now: now)
            return (changes, s.typing.nextDeadline)
        }
        let ts = clock.wallMs()
        for change in changes {
            let name = change.isTyping ? "typing:start" : "typing:stop"
            let payload = JSONValue.object([("room", .string(change.room)), ("from", .string(change.user)), ("ts", .int(ts))])
            let key = OutboundQueue<OutboundMessage>.CoalesceKey(event: "typing", room: change.room, user: change.user)
            publish(room: change.room, name: name, payload: payload, excludeUser: change.user, coalesceKey: key)
        }
        return next
    }

    // MARK: Live location

    public func startLiveShare(room: String, user: String, connection: ConnectionID, durationSec: Int64) throws(RelayError) {
        let now = clock.monotonicMs()
        let expires = try state.withLock { s throws(RelayError) in
            try s.locations.start(room: room, user: user, connection: connection, durationSec: durationSec, now: now)
        }
        locationTimer.schedule(at: expires)
    }

    public func checkLiveShare(room: String, user: String) throws(RelayError) {
        let now = clock.monotonicMs()
        try state.withLock { s throws(RelayError) in try s.locations.checkUpdate(room: room, user: user, now: now) }
    }

    public func stopLiveShare(room: String, user: String) -> Bool {
        state.withLockedValue { $0.locations.stop(room: room, user: user) }
    }

    private func expireLocations() -> Int64? {
        let now = clock.monotonicMs()
        let (expired, next) = state.withLockedValue { s in (s.locations.expire(now: now), s.locations.nextDeadline) }
        let ts = clock.wallMs()
        for key in expired {
            let payload = JSONValue.object([("room", .string(key.room)), ("from", .string(key.user)), ("ts", .int(ts)), ("reason", "expired")])
            publish(room: key.room, name: "location:stop", payload: payload)
        }
        return next
    }

    // MARK: Admin helpers

    /// Where a public `sid` lives, for admin lookups and kicks.
    public func locate(sid: String) -> (ConnectionID, LoopShard)? {
        state.withLockedValue { $0.sids[sid] }.map { ($0.0, shards[$0.1]) }
    }

    /// A user's connections with their rooms, for the admin API.
    public func connections(of user: String) -> [(ConnectionInfo, [String])] {
        state.withLockedValue { s in
            s.directory.connections(of: user).compactMap { id in
                s.info[id].map { ($0, s.rooms.rooms(of: id).sorted()) }
            }
        }
    }

    /// Rooms busiest first (then by name), optionally by prefix, from `offset`.
    public func roomsPage(prefix: String?, offset: Int, limit: Int) -> (rooms: [(room: String, members: Int, users: Int)], total: Int) {
        state.withLockedValue { s in
            var all = s.rooms.busiestRooms(limit: Int.max)
            if let prefix, !prefix.isEmpty { all = all.filter { $0.room.hasPrefix(prefix) } }
            let page = all.dropFirst(offset).prefix(limit).map { ($0.room, $0.members, s.rooms.presence(room: $0.room).count) }
            return (Array(page), all.count)
        }
    }

    /// Member counts of every room (the members-per-room histogram).
    public func roomSizes() -> [Int] {
        state.withLockedValue { s in s.rooms.busiestRooms(limit: Int.max).map(\.members) }
    }

    public var userCount: Int { state.withLockedValue { $0.directory.userCount } }

    /// Closes the connection with `sid` (admin kick). `false` if there is none.
    public func kick(sid: String, code: UInt16, reason: String) -> Bool {
        guard let (id, shard) = locate(sid: sid) else { return false }
        shard.eventLoop.execute { shard.sink(id)?.close(code: code, reason: reason) }
        return true
    }

    public func shutdownTimers() {
        typingTimer.cancel()
        locationTimer.cancel()
        for task in lagTasks.withLockedValue({ $0 }) { task.cancel() }
    }

    private let lagTasks = NIOLockedValueBox<[RepeatedTask]>([])

    /// Measures, on every loop, how late a 500 ms timer fires: a busy or blocked loop shows here.
    public func startLagMonitor() {
        let interval: Int64 = 500_000_000
        var tasks: [RepeatedTask] = []
        for shard in shards {
            let last = NIOLockedValueBox<UInt64>(NIODeadline.now().uptimeNanoseconds)
            let metrics = self.metrics
            tasks.append(shard.eventLoop.scheduleRepeatedTask(initialDelay: .nanoseconds(interval), delay: .nanoseconds(interval)) { _ in
                let now = NIODeadline.now().uptimeNanoseconds
                let previous = last.withLockedValue { old in defer { old = now }; return old }
                metrics.eventLoopLag.recordNanoseconds(max(0, Int64(now &- previous) - interval))
            })
        }
        lagTasks.withLockedValue { $0 = tasks }
    }
}
