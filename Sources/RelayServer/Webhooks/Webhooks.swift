import Logging
import NIOCore
import RelayBackends
import RelayCluster
import RelayCore

/// Webhooks (docs/PROTOCOL.md §13): what the hub tells, and where it goes.
///
/// The hub calls `userPresence`/`roomOccupancy` under its lock when this node gets its first
/// or loses its last socket of a user (member of a room), and `clientEvent` for allow-listed
/// client events. Each call is O(1) and does no I/O. Whether this node's first or last is the
/// deployment's is the `WebhookPresence`'s to decide (this node alone: `LocalWebhookPresence`;
/// a cluster: `RedisWebhookPresence`, atomically in Redis); its crossings and the client events
/// go to the `WebhookDispatcher`'s queues.
public final class Webhooks: Sendable {
    let dispatcher: WebhookDispatcher
    let clientEvents: Set<String>
    private let presence: any WebhookPresence

    init(settings: WebhookSettings, nodeID: String, presence: any WebhookPresence, clock: RelayClock, registry: PrometheusRegistry, logger: Logger) {
        let dispatcher = WebhookDispatcher(settings: settings, nodeID: nodeID, clock: clock, registry: registry, logger: logger)
        self.dispatcher = dispatcher
        self.clientEvents = settings.clientEvents
        self.presence = presence
        presence.setCrossingHandler { crossing in dispatcher.enqueue { id in Self.event(crossing, id: id) } }
    }

    /// Webhooks when `settings` has a URL: presence decided on this node, or across the cluster
    /// through `cluster`'s Redis.
    public static func make(settings: WebhookSettings, nodeID: String, cluster: ClusterBus?, clock: RelayClock, metrics: RelayMetrics, logger: Logger) -> Webhooks? {
        guard settings.isEnabled else { return nil }
        let presence: any WebhookPresence = cluster.map { RedisWebhookPresence(bus: $0, wallMs: clock.wallMs) } ?? LocalWebhookPresence(wallMs: clock.wallMs)
        return Webhooks(settings: settings, nodeID: nodeID, presence: presence, clock: clock, registry: metrics.registry, logger: logger)
    }

    // MARK: From the hub (under its lock: O(1), no I/O)

    /// This node got its first socket of `user` (`present`), or closed its last.
    func userPresence(_ user: String, present: Bool) {
        presence.change(.user, user, present: present)
    }

    /// This node got the first member of `room` (`present`), or lost its last.
    func roomOccupancy(_ room: String, present: Bool) {
        presence.change(.room, room, present: present)
    }

    /// A client event the room received; sent when its name is allow-listed.
    func clientEvent(name: String, room: String, from: String, payload: JSONValue, ts: Int64) {
        guard clientEvents.contains(name) else { return }
        dispatcher.enqueue { id in .client(id: id, name: name, room: room, from: from, payload: payload, ts: ts) }
    }

    static func event(_ crossing: PresenceCrossing, id: String) -> WebhookEvent {
        let (name, ts) = (crossing.name, crossing.ts)
        switch (crossing.subject, crossing.present) {
        case (.user, true): return .online(id: id, user: name, ts: ts)
        case (.user, false): return .offline(id: id, user: name, onlineMs: crossing.presentForMs, ts: ts)
        case (.room, true): return .occupied(id: id, room: name, ts: ts)
        case (.room, false): return .vacated(id: id, room: name, ts: ts)
        }
    }

    // MARK: Shutdown

    /// After the sockets are gone: what this node still holds leaves (announced), then the
    /// queues are flushed until `deadline`.
    func shutdown(deadline: NIODeadline) async {
        await presence.leave()
        await dispatcher.shutdown(deadline: deadline)
    }
}
