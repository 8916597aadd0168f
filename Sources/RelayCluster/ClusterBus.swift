import Logging
import NIOConcurrencyHelpers
import NIOCore
import RelayBackends
import RelayCore
import RelayRedis
import RelayLocks

/// This node's link to the other relay nodes, through Redis: per-room and per-user pub/sub
/// channels (sharded when Redis has it), and what rides on the link — room presence
/// (`presence`), the user directory (`directory`) and the heartbeat with the sweep of dead
/// nodes (`sweeper`). No home-made cluster protocol: nodes never talk to each other directly.
///
/// `@unchecked Sendable`: its callbacks (`onMessage`, `onLinkUp`, `onRestatePresence`,
/// `onLinkRestored`) are set once, before `start`, and only read afterwards.
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
    package let logger: Logger
    package let metrics: ClusterMetrics
    package let presence: ClusterPresenceStore
    package let directory: ClusterDirectory
    package let sweeper: NodeSweeper
    /// Publications on this node's channels (set by the `RedisBroker`).
    package var onMessage: (@Sendable (String, ByteBuffer) -> Void)?
    /// Called when the link to Redis comes back.
    package var onLinkUp: (@Sendable () -> Void)?
    /// Redis came back: restate this node's presence (set by the hub before `start`).
    package var onRestatePresence: (@Sendable () -> Void)?
    /// Webhooks: the link to Redis came (back) up (set before `start`).
    package var onLinkRestored: (@Sendable () -> Void)?
    /// Counts link changes: a wait for Redis to take writes ends when its link is gone.
    private let linkGeneration = AuditedLock<Int>(0)

    public init(nodeID: String, redis: RedisClient, options: Options, metrics: ClusterMetrics, logger: Logger) {
        self.nodeID = nodeID
        self.redis = redis
        self.metrics = metrics
        self.logger = logger
        let directory = ClusterDirectory(nodeID: nodeID, redis: redis, logger: logger)
        self.directory = directory
        self.presence = ClusterPresenceStore(nodeID: nodeID, redis: redis, logger: logger)
        self.sweeper = NodeSweeper(nodeID: nodeID, redis: redis, options: options, directory: directory, logger: logger)
    }

    public var isUp: Bool { redis.isUp }
    package var eventLoop: any EventLoop { redis.eventLoop }

    package func start() {
        metrics.linkUp.set(0)
        redis.start(
            onMessage: { [weak self] channel, payload in self?.onMessage?(channel, payload) },
            onLinkChange: { [weak self] up in self?.linkChanged(up) })
        sweeper.start()
    }

    package func stop() async {
        await sweeper.stop()
        await redis.stop()
    }

    /// Publishes an envelope; counts it as degraded when Redis cannot take it.
    package func publish(_ channel: String, _ envelope: ByteBuffer) {
        guard redis.isUp else {
            metrics.degraded.increment()
            return
        }
        redis.publish(channel, envelope).whenFailure { [metrics] _ in metrics.degraded.increment() }
    }

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
        sweeper.beat().whenComplete { [weak self] result in
            guard let self, self.linkGeneration.withLockedValue({ $0 }) == generation, self.redis.isUp else { return }
            switch result {
            case .success:
                body()
            case .failure(let error):
                if attempt == 0 { RedisRefusal.log(self.logger, error, "first heartbeat on a new link (retried)") }
                self.eventLoop.scheduleTask(in: .milliseconds(100)) { self.whenWritable(generation, attempt: attempt + 1, body) }
            }
        }
    }
}
