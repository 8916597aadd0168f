import NIOCore
import RelayBackends
import RelayCluster
import RelayCore
import ServiceLifecycle

/// The node's shared services, assembled once, and the few steps that span them (a connection
/// registered or gone, a room joined or left).
///
/// Each service owns its state and its locks: the `ConnectionRegistry` (users, sids, the node's
/// total), the `RoomDirectory` (members, presence, each connection's rooms), the `Publisher`
/// (audience → broker → event loops), `PresenceAnnouncer`, `TypingService`,
/// `LiveLocationService` and `EmitWindowService` (each with its own timer), `RecoveryHandover`
/// and `Revocations`. Per-socket and per-loop state is not here: each event loop's
/// `LoopPartition` holds its own sockets and local room members, walked without a lock.
public final class Hub: Sendable {
    /// How many lock stripes each kind of state is split over by default (Centrifuge's hub: 64).
    public static let defaultLockStripes = 64

    /// The event loops' partitions of the sockets, by loop index.
    public let partitions: [LoopPartition]
    public let clock: RelayClock
    public let metrics: RelayMetrics
    /// Memory or Redis, chosen once where the node is assembled.
    public let backends: NodeBackends
    let registry: ConnectionRegistry
    public let rooms: RoomDirectory
    public let publisher: Publisher
    let presence: PresenceAnnouncer
    /// Drops held in presence for `presence-grace-ms`.
    let grace: PresenceGrace
    let revocations: Revocations
    /// What the sockets' handlers are given: membership, typing, live shares, the recovery
    /// handover (the handlers' own bundles are made from it, `RelayContext`).
    let sockets: NodeSocketServices

    public var typing: TypingService { sockets.typing }
    var locations: LiveLocationService { sockets.locations }
    var handover: RecoveryHandover { sockets.handover }
    public var membership: Membership { sockets.membership }

    public convenience init(
        eventLoops: [any EventLoop], configuration: RelayConfiguration, clock: RelayClock = .system, metrics: RelayMetrics = RelayMetrics(),
        cluster: ClusterBus? = nil, webhooks: Webhooks? = nil, broker: (any Broker)? = nil, lockStripes: Int = Hub.defaultLockStripes
    ) {
        let backends = NodeBackends.make(configuration: configuration, clock: clock, cluster: cluster, webhooks: webhooks, broker: broker)
        self.init(eventLoops: eventLoops, configuration: configuration, backends: backends, clock: clock, metrics: metrics, lockStripes: lockStripes)
    }

    public init(
        eventLoops: [any EventLoop], configuration: RelayConfiguration, backends: NodeBackends, clock: RelayClock = .system,
        metrics: RelayMetrics = RelayMetrics(), lockStripes: Int = Hub.defaultLockStripes
    ) {
        precondition(!eventLoops.isEmpty)
        // Rounded up to a power of two by `LockStripes`; 1 is one lock per kind of state (the
        // lock benchmark compares it with the default).
        let stripes = max(1, lockStripes)
        let partitions = eventLoops.enumerated().map { LoopPartition(index: $0.offset, eventLoop: $0.element, metrics: metrics) }
        let timerLoop = eventLoops[0]
        let broker = backends.broker
        let registry = ConnectionRegistry(
            maxConnections: configuration.connections.maxConnections, maxConnectionsPerUser: configuration.connections.maxConnectionsPerUser, stripes: stripes,
            broker: broker, directory: backends.users, webhooks: backends.webhooks)
        let rooms = RoomDirectory(
            maxMembersPerRoom: configuration.events.maxMembersPerRoom, maxRoomsPerConnection: configuration.events.maxRoomsPerConnection,
            userJoins: configuration.events.userJoins, stripes: stripes,
            broker: broker, webhooks: backends.webhooks)
        let windows = EmitWindowService(timerLoop: timerLoop, clock: clock, metrics: metrics)
        let publisher = Publisher(
            loops: partitions, rooms: rooms, registry: registry, broker: broker, windows: windows,
            deflateThresholdBytes: configuration.engine.deflateThresholdBytes)
        self.partitions = partitions
        self.clock = clock
        self.metrics = metrics
        self.backends = backends
        self.registry = registry
        self.rooms = rooms
        self.publisher = publisher
        let presence = PresenceAnnouncer(
            rooms: rooms, registry: registry, manager: backends.presence, directory: backends.users, broker: broker, publisher: publisher, clock: clock, homeLoop: timerLoop)
        self.presence = presence
        let typing = TypingService(
            windowMs: configuration.events.typingWindowMs, expiryMs: configuration.events.typingExpiryMs, stripes: stripes, timerLoop: timerLoop, clock: clock,
            publisher: publisher)
        let locations = LiveLocationService(
            maxSharesPerConnection: configuration.connections.maxLiveSharesPerConnection, timerLoop: timerLoop, clock: clock, publisher: publisher)
        let grace = PresenceGrace(
            graceMs: Int64(configuration.events.presenceGraceMs), rooms: rooms, registry: registry, announcer: presence, clock: clock, timerLoop: timerLoop)
        self.grace = grace
        self.sockets = NodeSocketServices(
            membership: Membership(
                registry: registry, rooms: rooms, presence: presence, typing: typing, locations: locations, grace: grace, clock: clock, metrics: metrics),
            typing: typing, locations: locations,
            handover: RecoveryHandover(stripes: stripes, loops: partitions, kept: backends.keptSessions, control: backends.control))
        self.revocations = Revocations(
            ttlSeconds: configuration.auth.revocationTTLSeconds, registry: registry, loops: partitions, kept: backends.keptSessions, control: backends.control,
            clock: clock, metrics: metrics)
        wire(timerLoop: timerLoop)
    }

    /// Connects the backends' callbacks to the services (weakly: the backends outlive nothing).
    /// (Events from other nodes need no wiring: the publisher subscribes itself to the broker.)
    private func wire(timerLoop: any EventLoop) {
        let (presence, revocations, handover) = (self.presence, self.revocations, self.handover)
        backends.control.setControlHandler { [weak revocations, weak handover] control in
            switch control {
            case .disconnectUser(let user, let cutoff): revocations?.receivedEnd(user: user, revokedBefore: cutoff)
            case .handOver(let pid, let user): _ = handover?.handOver(pid: pid, user: user, on: timerLoop)
            }
        }
        backends.cluster?.onRestatePresence = { [weak presence, weak revocations] in
            presence?.restate()
            revocations?.load(on: timerLoop)
        }
        backends.cluster?.sweeper.onPresenceGone = { [weak presence] room, user in presence?.clusterLeft(room: room, user: user) }
    }

    /// The partition of the loop a channel lives on.
    public func partition(for loop: any EventLoop) -> LoopPartition {
        let id = ObjectIdentifier(loop)
        guard let partition = partitions.first(where: { ObjectIdentifier($0.eventLoop) == id }) else {
            preconditionFailure("event loop is not served by this hub")
        }
        return partition
    }

    public var connectionCount: Int { registry.connectionCount }

    /// Background work of the node, run by the service group next to the server: the loops'
    /// lag monitor, the memory history's trims.
    var backgroundServices: [any Service] {
        var services: [any Service] = [LagMonitor(loops: partitions.map(\.eventLoop), metrics: metrics)]
        if let memory = backends.memoryHistory { services.append(HistoryTrimmer(broker: memory, loop: partitions[0].eventLoop)) }
        return services
    }

    /// Stops the services' timers (shutdown).
    public func stopTimers() {
        typing.cancel()
        locations.cancel()
        publisher.windows.cancel()
        grace.cancel()
    }

    /// Ends every presence hold now (shutdown, once the sockets are gone): the node will not be
    /// there to end them later.
    public func endPresenceHolds() {
        grace.endAll()
    }
}
