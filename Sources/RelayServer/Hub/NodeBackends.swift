import RelayBackends
import RelayCluster
import RelayCore

/// What a node keeps beyond its own sockets — the broker (delivery and history), the kept
/// sessions (recovery, revocations), presence — in memory on one node or in Redis in a cluster,
/// chosen here once; plus the cluster link and the webhooks, when configured. Nothing else asks
/// which kind it has.
public struct NodeBackends: Sendable {
    public let broker: any Broker
    /// Control messages to the other nodes (none on one node).
    public let control: any ControlChannel
    /// The memory broker's history, when the node keeps it (its trims, its figures in metrics).
    public let memoryHistory: MemoryBroker?
    public let keptSessions: any KeptSessionStore
    public let presence: any PresenceManager
    /// Users: online, last seen, their rooms.
    public let users: any UserDirectory
    public let cluster: ClusterBus?
    public let webhooks: Webhooks?

    /// Memory backends for one node, Redis ones when `cluster` is given. `broker` replaces the
    /// memory broker (tests).
    public static func make(
        configuration: RelayConfiguration, clock: RelayClock, cluster: ClusterBus?, webhooks: Webhooks?, broker: (any Broker)? = nil
    ) -> NodeBackends {
        let limits = configuration.recovery.historyLimits
        // Each of a user's allowed connections may leave a session waiting and one more.
        let keptPerUser = max(8, 2 * configuration.connections.maxConnectionsPerUser)
        if let cluster {
            let redis = RedisBroker(bus: cluster, limits: limits, wallMs: clock.wallMs)
            return NodeBackends(
                broker: redis, control: redis, memoryHistory: nil,
                keptSessions: RedisKeptSessionStore(redis: cluster.redis, maxPerUser: keptPerUser),
                presence: RedisPresenceManager(bus: cluster), users: RedisUserDirectory(bus: cluster), cluster: cluster, webhooks: webhooks)
        }
        let memory = broker == nil ? MemoryBroker(limits: limits, wallMs: clock.wallMs) : nil
        return NodeBackends(
            broker: broker ?? memory ?? MemoryBroker(limits: limits, wallMs: clock.wallMs), control: LocalControlChannel(), memoryHistory: memory,
            keptSessions: MemoryKeptSessionStore(wallMs: clock.wallMs, maxPerUser: keptPerUser),
            presence: MemoryPresenceManager(), users: MemoryUserDirectory(), cluster: nil, webhooks: webhooks)
    }
}
