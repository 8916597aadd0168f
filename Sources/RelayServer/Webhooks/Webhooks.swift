import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import RelayBackends
import RelayCluster
import RelayCore
import RelayRedis
import RelayLocks

/// Webhooks (docs/PROTOCOL.md §13): what the hub tells, and who decides.
///
/// The hub calls `userPresence`/`roomOccupancy` under its lock when this node gets its first
/// or loses its last socket of a user (member of a room), and `clientEvent` for allow-listed
/// client events. Each call is O(1) and does no I/O: on one node it decides at once (this node
/// is the cluster) and enqueues the event; in a cluster it hands the change to Redis, where
/// `WebhookScripts.setPresent` decides atomically across nodes (on the member's own key, one slot), and the one node that sees the
/// count go 0 → 1 or 1 → 0 enqueues the event. A dead node's users and rooms are swept by the
/// node that claims its sweep (`ClusterBus`), each exactly once.
public final class Webhooks: Sendable {
    enum Kind: Sendable { case user, room }

    private struct State: Sendable {
        /// One node: when each user came online (wall ms).
        var onlineSince: [String: Int64] = [:]
        /// Cluster: what this node holds, and what Redis has not been told yet.
        var localUsers: Set<String> = []
        var localRooms: Set<String> = []
        var dirtyUsers: Set<String> = []
        var dirtyRooms: Set<String> = []
        /// Cluster: changes are sent once this node's leftovers (a restart under the same node
        /// id) are swept and its state restated.
        var ready = false
    }

    let dispatcher: WebhookDispatcher
    let clientEvents: Set<String>
    private let bus: ClusterBus?
    private let clock: RelayClock
    private let logger: Logger
    private let state = AuditedLock(State())
    /// Members swept per script call.
    static let sweepChunk = 500

    init(settings: WebhookSettings, nodeID: String, cluster: ClusterBus?, clock: RelayClock, registry: PrometheusRegistry, logger: Logger) {
        self.dispatcher = WebhookDispatcher(settings: settings, nodeID: nodeID, clock: clock, registry: registry, logger: logger)
        self.clientEvents = settings.clientEvents
        self.bus = cluster
        self.clock = clock
        self.logger = logger
    }

    /// Webhooks when `settings` has a URL; hooks itself into the cluster bus's link and sweep.
    public static func make(settings: WebhookSettings, nodeID: String, cluster: ClusterBus?, clock: RelayClock, metrics: RelayMetrics, logger: Logger) -> Webhooks? {
        guard settings.isEnabled else { return nil }
        let webhooks = Webhooks(settings: settings, nodeID: nodeID, cluster: cluster, clock: clock, registry: metrics.registry, logger: logger)
        cluster?.sweeper.onSweepClaimed = { [weak webhooks] dead in _ = webhooks?.sweep(node: dead) }
        cluster?.onLinkRestored = { [weak webhooks] in webhooks?.linkUp() }
        return webhooks
    }

    // MARK: From the hub (under its lock: O(1), no I/O)

    /// This node got its first socket of `user` (`present`), or closed its last.
    func userPresence(_ user: String, present: Bool) {
        change(.user, user, present: present)
    }

    /// This node got the first member of `room` (`present`), or lost its last.
    func roomOccupancy(_ room: String, present: Bool) {
        change(.room, room, present: present)
    }

    /// A client event the room received; sent when its name is allow-listed.
    func clientEvent(name: String, room: String, from: String, payload: JSONValue, ts: Int64) {
        guard clientEvents.contains(name) else { return }
        dispatcher.enqueue { id in .client(id: id, name: name, room: room, from: from, payload: payload, ts: ts) }
    }

    private func change(_ kind: Kind, _ name: String, present: Bool) {
        guard let bus else {
            decideLocally(kind, name, present: present)
            return
        }
        state.withLockedValue { s in
            switch kind {
            case .user: if present { s.localUsers.insert(name) } else { s.localUsers.remove(name) }
            case .room: if present { s.localRooms.insert(name) } else { s.localRooms.remove(name) }
            }
            // Sent under this lock, so Redis gets the changes in the order they happened.
            if s.ready && bus.isUp {
                send(kind, name, present: present, bus: bus)
            } else {
                switch kind {
                case .user: s.dirtyUsers.insert(name)
                case .room: s.dirtyRooms.insert(name)
                }
            }
        }
    }

    /// One node: it is the whole cluster.
    private func decideLocally(_ kind: Kind, _ name: String, present: Bool) {
        let now = clock.wallMs()
        switch kind {
        case .user:
            if present {
                state.withLockedValue { $0.onlineSince[name] = now }
                dispatcher.enqueue { .online(id: $0, user: name, ts: now) }
            } else {
                let since = state.withLockedValue { $0.onlineSince.removeValue(forKey: name) } ?? now
                dispatcher.enqueue { .offline(id: $0, user: name, onlineMs: now - since, ts: now) }
            }
        case .room:
            dispatcher.enqueue { present ? .occupied(id: $0, room: name, ts: now) : .vacated(id: $0, room: name, ts: now) }
        }
    }

    // MARK: Cluster

    /// Tells Redis; the answer says whether this node saw the cluster-wide first or last.
    private func send(_ kind: Kind, _ name: String, present: Bool, bus: ClusterBus) {
        let commands = WebhookScripts.setPresentCommands(kind, name, node: bus.nodeID, present: present)
        // Pipelined on one connection, in this order (see WebhookScripts).
        if let before = commands.before { bus.redis.send(before).whenFailure { [logger] in RedisRefusal.log(logger, $0, "webhook node set") } }
        let script = bus.redis.send(commands.script)
        if let after = commands.after { bus.redis.send(after).whenFailure { [logger] in RedisRefusal.log(logger, $0, "webhook node set") } }
        script.whenComplete { result in
            switch result {
            case .success(let reply):
                guard let items = reply.elements, items.count == 4, let before = items[0].int, let after = items[1].int,
                    let since = items[2].int, let now = items[3].int
                else {
                    self.logger.warning("unexpected webhook presence reply from Redis")
                    return
                }
                if before == 0 && after > 0 {
                    self.enqueue(kind, name, present: true, onlineMs: 0, ts: now)
                } else if before > 0 && after == 0 {
                    self.enqueue(kind, name, present: false, onlineMs: now - since, ts: now)
                }
            case .failure(let error):
                RedisRefusal.log(self.logger, error, "webhook presence")
                // Restated (with whatever this node then holds) when the link is back.
                self.state.withLockedValue { s in
                    switch kind {
                    case .user: _ = s.dirtyUsers.insert(name)
                    case .room: _ = s.dirtyRooms.insert(name)
                    }
                }
            }
        }
    }

    private func enqueue(_ kind: Kind, _ name: String, present: Bool, onlineMs: Int64, ts: Int64) {
        dispatcher.enqueue { id in
            switch (kind, present) {
            case (.user, true): return .online(id: id, user: name, ts: ts)
            case (.user, false): return .offline(id: id, user: name, onlineMs: onlineMs, ts: ts)
            case (.room, true): return .occupied(id: id, room: name, ts: ts)
            case (.room, false): return .vacated(id: id, room: name, ts: ts)
            }
        }
    }

    /// The link to Redis is (back) up. The first time: sweep what this node id left from a
    /// previous run (killed, restarted under the same id: its users are announced offline),
    /// then state what it holds. Later: state again everything it holds (Redis
    /// may have restarted empty; what it already knew changes nothing) and what changed while
    /// it was down.
    func linkUp() {
        guard let bus else { return }
        let first = state.withLockedValue { !$0.ready }
        if first {
            sweep(node: bus.nodeID).whenComplete { _ in self.restate(bus: bus) }
        } else {
            restate(bus: bus)
        }
    }

    private func restate(bus: ClusterBus) {
        guard bus.isUp else { return }
        state.withLockedValue { s in
            s.ready = true
            let users = s.localUsers.union(s.dirtyUsers), rooms = s.localRooms.union(s.dirtyRooms)
            s.dirtyUsers = []
            s.dirtyRooms = []
            for u in users { send(.user, u, present: s.localUsers.contains(u), bus: bus) }
            for r in rooms { send(.room, r, present: s.localRooms.contains(r), bus: bus) }
        }
    }

    /// Removes a node's users and rooms (a dead node's, claimed by this node; or this node's own
    /// leftovers) and sends `user:offline` / `room:vacated` for those no node holds any more.
    @discardableResult
    func sweep(node: String, announce: Bool = true) -> EventLoopFuture<Void> {
        guard let bus else { return MultiThreadedEventLoopGroup.singleton.next().makeSucceededVoidFuture() }
        return sweepSet(.user, node: node, bus: bus, announce: announce).and(sweepSet(.room, node: node, bus: bus, announce: announce)).map { _ in () }
    }

    /// Up to `sweepChunk` members of the node's set at a time: one script per member (each in
    /// its own slot, pipelined), then they leave the set; until the set is empty. A member is
    /// removed from the set only after its script ran, so a sweep cut short is taken up again
    /// (the script is idempotent: a node that no longer holds the member changes nothing).
    private func sweepSet(_ kind: Kind, node: String, bus: ClusterBus, announce: Bool) -> EventLoopFuture<Void> {
        let set = WebhookScripts.nodeSet(kind, node)
        return bus.redis.send(["SRANDMEMBER", set, String(Self.sweepChunk)]).flatMap { reply in
            let members = (reply.elements ?? []).compactMap(\.string)
            guard !members.isEmpty else { return bus.redis.eventLoop.makeSucceededVoidFuture() }
            let sweeps = members.map { name in
                bus.redis.send(WebhookScripts.sweepMemberCommand(kind, name, node: node)).map { reply -> (String, Int64)? in
                    guard let items = reply.elements, items.count == 2, items[0].int == 1, let ms = items[1].int else { return nil }
                    return (name, ms)
                }
            }
            return EventLoopFuture.whenAllSucceed(sweeps, on: bus.redis.eventLoop).flatMap { gone in
                let now = self.clock.wallMs()
                if announce {
                    for case let (name, ms)? in gone { self.enqueue(kind, name, present: false, onlineMs: ms, ts: now) }
                }
                return bus.redis.send(["SREM", set] + members).flatMap { _ in self.sweepSet(kind, node: node, bus: bus, announce: announce) }
            }
        }
    }

    // MARK: Shutdown

    /// After the sockets are gone: this node's leftovers in Redis are swept (announced), then
    /// the queues are flushed until `deadline`.
    func shutdown(deadline: NIODeadline) async {
        if let bus, bus.isUp {
            // Let the last changes reach Redis before sweeping what is left.
            _ = try? await bus.redis.send(["PING"]).get()
            try? await sweep(node: bus.nodeID).get()
        }
        await dispatcher.shutdown(deadline: deadline)
    }
}
