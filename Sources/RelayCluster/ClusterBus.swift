import Logging
import NIOConcurrencyHelpers
import NIOCore
import RelayBackends
import RelayCore
import RelayRedis

/// This node's link to the other relay nodes, through Redis: per-room and per-user pub/sub
/// channels (sharded when Redis has it), cluster-wide presence with per-node heartbeats, and
/// the sweep that removes a dead node's presence. No home-made cluster protocol: nodes never
/// talk to each other directly.
///
/// Its callbacks (`onMessage`, `onLinkUp`, `onRestatePresence`, `onPresenceGone`) are set once,
/// before `start`, and only read afterwards; `heartbeatTask` is touched only by `start` and
/// `stop`: that is what makes the `@unchecked Sendable` safe.
public final class ClusterBus: @unchecked Sendable {
    public struct Options: Sendable {
        /// How often this node refreshes its heartbeat and looks for dead nodes
        /// (`cluster-heartbeat-ms`).
        public var heartbeatMs: Int64
        /// A node whose last heartbeat is older than this is dead (its presence is removed):
        /// three heartbeats.
        public var nodeTTLMs: Int64 { heartbeatMs * 3 }

        public init(heartbeatMs: Int64) {
            self.heartbeatMs = heartbeatMs
        }
    }

    public let nodeID: String
    package let redis: RedisClient
    package let options: Options
    package let logger: Logger
    package let metrics: ClusterMetrics
    /// Redis came back: restate this node's presence (set by the hub before `start`).
    package var onRestatePresence: (@Sendable () -> Void)?
    /// A dead node's user is gone from a room cluster-wide (set by the hub before `start`).
    package var onPresenceGone: (@Sendable (_ room: String, _ user: String) -> Void)?
    /// Webhooks: this node claimed a dead node's sweep (set before `start`).
    package var onSweepClaimed: (@Sendable (_ node: String) -> Void)?
    /// Webhooks: the link to Redis came (back) up (set before `start`).
    package var onLinkRestored: (@Sendable () -> Void)?
    private var heartbeatTask: RepeatedTask?
    /// The users this node has told the directory it has sockets of (its `relay:node-users`
    /// set as this node wrote it). Directory writes are sent under this lock, so a restatement
    /// and the connects and disconnects around it reach Redis in order.
    package let statedUsers = AuditedLock<Set<String>>([])
    /// Counts link changes: a wait for Redis to take writes ends when its link is gone.
    private let linkGeneration = AuditedLock<Int>(0)

    /// `{name}`: the hash tag of a room's, user's or node's keys and channel (Redis Cluster puts
    /// keys with one tag in one slot). A name that starts with `}` would make the tag empty (the
    /// whole key hashed): it gets a U+001F first (no valid name has one, so no two names meet).
    ///
    /// Redis hashes bytes, so every test here is on bytes (UTF-8), never on characters: `}`
    /// followed by a combining mark is one `Character` but still a `}` byte to Redis.
    package static func tag(_ name: String) -> String {
        name.utf8.first == UInt8(ascii: "}") ? "{\u{1F}" + name + "}" : "{" + name + "}"
    }

    /// The name inside a `tag`: nil when `tagged` is not one.
    package static func untag(_ tagged: Substring) -> String? {
        let bytes = tagged.utf8
        guard bytes.count >= 2, bytes.first == UInt8(ascii: "{"), bytes.last == UInt8(ascii: "}") else { return nil }
        var inner = bytes.dropFirst().dropLast()
        if inner.count >= 2, inner.first == 0x1F, inner.dropFirst().first == UInt8(ascii: "}") { inner = inner.dropFirst() }
        return String(decoding: inner, as: UTF8.self)
    }

    package static func roomChannel(_ room: String) -> String { "relay:room:" + tag(room) }
    package static func userChannel(_ user: String) -> String { "relay:user:" + tag(user) }
    package static let nodesKey = "relay:nodes"

    public init(nodeID: String, redis: RedisClient, options: Options, metrics: ClusterMetrics, logger: Logger) {
        self.nodeID = nodeID
        self.redis = redis
        self.options = options
        self.metrics = metrics
        self.logger = logger
    }

    public var isUp: Bool { redis.isUp }
    package var eventLoop: any EventLoop { redis.eventLoop }

    package func start() {
        metrics.linkUp.set(0)
        redis.start(
            onMessage: { [weak self] channel, payload in self?.onMessage?(channel, payload) },
            onLinkChange: { [weak self] up in self?.linkChanged(up) })
        heartbeatTask = eventLoop.scheduleRepeatedTask(initialDelay: .milliseconds(options.heartbeatMs), delay: .milliseconds(options.heartbeatMs)) { [weak self] _ in
            self?.heartbeat()
        }
    }

    package func stop() async {
        heartbeatTask?.cancel()
        // Leave the cluster's presence at once rather than after the TTL.
        if redis.isUp { _ = try? await sweep(node: nodeID).get() }
        await redis.stop()
    }

    // MARK: Channels

    /// Publications on this node's channels (set by the `RedisBroker`).
    package var onMessage: (@Sendable (String, ByteBuffer) -> Void)?
    /// Called when the link to Redis comes back.
    package var onLinkUp: (@Sendable () -> Void)?

    /// Publishes an envelope; counts it as degraded when Redis cannot take it.
    package func publish(_ channel: String, _ envelope: ByteBuffer) {
        guard redis.isUp else {
            metrics.degraded.increment()
            return
        }
        redis.publish(channel, envelope).whenFailure { [metrics] _ in metrics.degraded.increment() }
    }

    // MARK: Presence

    package static func presenceKey(_ room: String) -> String { "relay:presence:" + tag(room) }
    package static func presenceUsersKey(_ room: String) -> String { "relay:presence-users:" + tag(room) }
    package static func nodeRoomsKey(_ node: String) -> String { "relay:node-rooms:" + tag(node) }
    /// The field of `relay:user-rooms:{user}` that `node` owns for `room`.
    package static func userRoomField(room: String, node: String) -> String { room + "\u{1F}" + node }

    /// The commands of one presence change, in the order they are sent: the node's room set
    /// first (so a sweep of this node finds the room whatever happens next), the room's script
    /// (atomic: its before/after), then this node's field of the user's rooms. Each touches one
    /// slot: the node's, the room's, the user's.
    package static func presenceCommands(node: String, room: String, user: String, devices: Int) -> (nodeRooms: [String]?, script: [String], userRooms: [String]) {
        let field = userRoomField(room: room, node: node)
        return (
            devices > 0 ? ["SADD", nodeRoomsKey(node), room] : nil,
            ["EVAL", ClusterScripts.updatePresence, "2", presenceKey(room), presenceUsersKey(room), node, user, String(devices)],
            devices > 0 ? ["HSET", userRoomsKey(user), field, String(devices)] : ["HDEL", userRoomsKey(user), field]
        )
    }

    /// Sets this node's device count for `user` in `room`; returns the cluster totals before and
    /// after, and the room's cluster presence.
    package func updatePresence(room: String, user: String, devices: Int) -> EventLoopFuture<PresenceUpdate> {
        let commands = Self.presenceCommands(node: nodeID, room: room, user: user, devices: devices)
        // Pipelined in this order: one Redis runs them so; in a cluster each key's commands
        // keep their order (one link per master) while the three slots may interleave, which
        // matters only for a crash between them (the sweeps tolerate either leftover).
        if let add = commands.nodeRooms { redis.send(add).whenFailure { [logger] in Self.log(logger, $0, "node rooms") } }
        let script = redis.send(commands.script)
        script.whenFailure { [logger] in Self.log(logger, $0, "presence") }
        redis.send(commands.userRooms).whenFailure { [logger] in Self.log(logger, $0, "user rooms") }
        return script.flatMapThrowing { reply in
            guard let items = reply.elements, items.count == 3, let before = items[0].int, let after = items[1].int else {
                throw RESPError.server("unexpected presence reply")
            }
            return PresenceUpdate(before: Int(before), after: Int(after), presence: Self.entries(items[2]))
        }
    }

    /// Logs a Redis error reply (a refused command, e.g. CROSSSLOT); not a link that is down.
    package static func log(_ logger: Logger, _ error: any Error, _ what: String) {
        if case RESPError.server(let message) = error {
            logger.warning("redis refused a command", metadata: ["what": "\(what)", "error": "\(message)"])
        }
    }

    /// The room's presence across every node.
    package func presence(room: String) -> EventLoopFuture<[PresenceEntry]> {
        redis.send(["HGETALL", Self.presenceUsersKey(room)]).map(Self.entries)
    }

    /// `user → count` from a RESP3 map or a RESP2 flat array, sorted by user.
    package static func entries(_ value: RESPValue) -> [PresenceEntry] {
        var out: [PresenceEntry] = []
        if case .map(let pairs) = value {
            for (k, v) in pairs { if let u = k.string, let n = v.int { out.append(PresenceEntry(user: u, devices: Int(n))) } }
        } else if let flat = value.elements {
            var i = 0
            while i + 1 < flat.count {
                if let u = flat[i].string, let n = flat[i + 1].int { out.append(PresenceEntry(user: u, devices: Int(n))) }
                i += 2
            }
        }
        return out.sorted { $0.user < $1.user }
    }

    // MARK: Liveness

    private func linkChanged(_ up: Bool) {
        metrics.linkUp.set(up ? 1 : 0)
        guard up else {
            linkGeneration.withLockedValue { $0 += 1 }
            logger.warning("cluster degraded to node-local delivery: Redis is down")
            return
        }
        logger.info("cluster link up", metadata: ["node": "\(nodeID)"])
        let generation = linkGeneration.withLockedValue { g -> Int in
            g += 1
            return g
        }
        whenWritable(generation, attempt: 0) { [weak self] in
            guard let self else { return }
            self.onLinkUp?()
            // Redis may have restarted empty, or swept this node while it could not beat: state
            // this node's presence again (users that reappear are announced).
            self.onRestatePresence?()
            self.onLinkRestored?()
        }
    }

    /// Runs `body` once Redis takes this node's heartbeat: a link can be up while Redis still
    /// refuses writes (a restarted cluster node answers CLUSTERDOWN for its first seconds, a
    /// loading one LOADING), and a restatement sent then would be lost. Retried every 100 ms
    /// while this link (`generation`) lasts.
    private func whenWritable(_ generation: Int, attempt: Int, _ body: @escaping @Sendable () -> Void) {
        redis.send(Self.heartbeatCommand(node: nodeID, ttlMs: options.nodeTTLMs)).whenComplete { [weak self] result in
            guard let self, self.linkGeneration.withLockedValue({ $0 }) == generation, self.redis.isUp else { return }
            switch result {
            case .success(let reply):
                self.sweepDead(reply)
                body()
            case .failure(let error):
                if attempt == 0 { Self.log(self.logger, error, "first heartbeat on a new link (retried)") }
                self.eventLoop.scheduleTask(in: .milliseconds(100)) { self.whenWritable(generation, attempt: attempt + 1, body) }
            }
        }
    }

    private func heartbeat() {
        guard redis.isUp else { return }
        redis.send(Self.heartbeatCommand(node: nodeID, ttlMs: options.nodeTTLMs)).whenSuccess { [weak self] reply in
            self?.sweepDead(reply)
        }
    }

    /// The dead nodes a heartbeat answered: each is claimed and swept by one survivor.
    private func sweepDead(_ reply: RESPValue) {
        for dead in (reply.elements ?? []).compactMap(\.string) where dead != nodeID {
            claimAndSweep(dead)
        }
    }

    /// One surviving node (whichever takes the lock) removes a dead node's presence and
    /// announces the users who are gone.
    private func claimAndSweep(_ dead: String) {
        redis.send(["SET", "relay:sweep:\(dead)", nodeID, "NX", "PX", String(options.nodeTTLMs * 5)]).whenSuccess { [weak self] reply in
            guard let self, reply == .simpleString("OK") else { return }
            self.logger.warning("node presumed dead; removing its presence", metadata: ["node": "\(dead)"])
            self.onSweepClaimed?(dead)
            self.sweep(node: dead).whenSuccess { gone in
                for (room, user) in gone { self.onPresenceGone?(room, user) }
            }
        }
    }

    /// The sweep of one room of a dead node (the room's slot).
    package static func sweepRoomCommand(node: String, room: String) -> [String] {
        ["EVAL", ClusterScripts.sweepRoom, "2", presenceKey(room), presenceUsersKey(room), node]
    }

    package static func heartbeatCommand(node: String, ttlMs: Int64) -> [String] {
        ["EVAL", ClusterScripts.heartbeat, "1", nodesKey, node, String(ttlMs)]
    }

    /// Removes every presence entry of `node`; returns (room, user) pairs gone from the cluster.
    /// Per room (one slot each, pipelined): the room's script, then the node's field of each of
    /// its users' rooms; then the swept rooms leave the node's set, then its users are swept.
    /// Only the sweeper writes a dead node's keys, so the steps need not be one transaction.
    package func sweep(node: String) -> EventLoopFuture<[(String, String)]> {
        redis.send(["SMEMBERS", Self.nodeRoomsKey(node)]).flatMap { reply in
            let rooms = (reply.elements ?? []).compactMap(\.string)
            let futures = rooms.map { room in
                self.redis.send(Self.sweepRoomCommand(node: node, room: room)).map { r -> [(String, String)] in
                    let items = r.elements ?? []
                    var gone: [(String, String)] = []
                    var i = 0
                    while i + 1 < items.count {
                        if let user = items[i].string {
                            self.redis.send(["HDEL", Self.userRoomsKey(user), Self.userRoomField(room: room, node: node)])
                                .whenFailure { [logger = self.logger] in Self.log(logger, $0, "user rooms") }
                            if items[i + 1].int == 1 { gone.append((room, user)) }
                        }
                        i += 2
                    }
                    return gone
                }
            }
            return EventLoopFuture.whenAllSucceed(futures, on: self.eventLoop).flatMap { gone in
                let done = rooms.isEmpty ? self.eventLoop.makeSucceededFuture(RESPValue.integer(0)) : self.redis.send(["SREM", Self.nodeRoomsKey(node)] + rooms)
                return done.map { _ in gone.flatMap { $0 } }
            }
        }.flatMap { gone in
            self.sweepUsers(node: node).flatMap { _ in
                self.redis.send(["ZREM", Self.nodesKey, node])
            }.map { _ in gone }
        }
    }
}
