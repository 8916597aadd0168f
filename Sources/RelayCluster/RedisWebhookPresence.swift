import Logging
import NIOCore
import NIOPosix
import RelayBackends
import RelayLocks
import RelayRedis

/// Webhook presence across nodes: each change goes to Redis, where `WebhookScripts.setPresent`
/// decides atomically (on the member's own key, one slot), and the one node whose call sees
/// the count go 0 → 1 or 1 → 0 hands on the crossing. A dead node's users and rooms are swept
/// by the node that claims its sweep (`NodeSweeper`), each exactly once.
public final class RedisWebhookPresence: WebhookPresence {
    private struct State: Sendable {
        /// What this node holds, and what Redis has not been told yet.
        var localUsers: Set<String> = []
        var localRooms: Set<String> = []
        var dirtyUsers: Set<String> = []
        var dirtyRooms: Set<String> = []
        /// Changes are sent once this node's leftovers (a restart under the same node id) are
        /// swept and its state restated.
        var ready = false
    }

    private let bus: ClusterBus
    private let wallMs: @Sendable () -> Int64
    private let state = AuditedLock(State())
    private let handler = CallbackSlot<@Sendable (PresenceCrossing) -> Void>()
    /// Members swept per script call.
    package static let sweepChunk = 500

    /// Hooks itself into the bus's link (restated when it is up) and sweeps (a dead node's
    /// users and rooms).
    public init(bus: ClusterBus, wallMs: @escaping @Sendable () -> Int64) {
        self.bus = bus
        self.wallMs = wallMs
        bus.sweeper.onSweepClaimed = { [weak self] dead in _ = self?.sweep(node: dead) }
        bus.onLinkRestored = { [weak self] in self?.linkUp() }
    }

    public func setCrossingHandler(_ handler: @escaping @Sendable (PresenceCrossing) -> Void) {
        self.handler.set(handler)
    }

    public func change(_ subject: PresenceSubject, _ name: String, present: Bool) {
        state.withLockedValue { s in
            switch subject {
            case .user: if present { s.localUsers.insert(name) } else { s.localUsers.remove(name) }
            case .room: if present { s.localRooms.insert(name) } else { s.localRooms.remove(name) }
            }
            // Sent under this lock, so Redis gets the changes in the order they happened.
            if s.ready && bus.isUp {
                send(subject, name, present: present)
            } else {
                switch subject {
                case .user: s.dirtyUsers.insert(name)
                case .room: s.dirtyRooms.insert(name)
                }
            }
        }
    }

    /// After the sockets are gone: this node's leftovers in Redis are swept (announced).
    public func leave() async {
        guard bus.isUp else { return }
        // Let the last changes reach Redis before sweeping what is left.
        _ = try? await bus.redis.send(["PING"]).get()
        try? await sweep(node: bus.nodeID).get()
    }

    /// Tells Redis; the answer says whether this node saw the cluster-wide first or last.
    private func send(_ subject: PresenceSubject, _ name: String, present: Bool) {
        let commands = WebhookScripts.setPresentCommands(subject, name, node: bus.nodeID, present: present)
        let (redis, logger) = (bus.redis, bus.logger)
        // Pipelined on one connection, in this order (see WebhookScripts).
        if let before = commands.before { redis.send(before).whenFailure { RedisRefusal.log(logger, $0, "webhook node set") } }
        let script = redis.send(commands.script)
        if let after = commands.after { redis.send(after).whenFailure { RedisRefusal.log(logger, $0, "webhook node set") } }
        script.whenComplete { result in
            switch result {
            case .success(let reply):
                guard let items = reply.elements, items.count == 4, let before = items[0].int, let after = items[1].int,
                    let since = items[2].int, let now = items[3].int
                else {
                    logger.warning("unexpected webhook presence reply from Redis")
                    return
                }
                if before == 0 && after > 0 {
                    self.cross(subject, name, present: true, presentForMs: 0, ts: now)
                } else if before > 0 && after == 0 {
                    self.cross(subject, name, present: false, presentForMs: now - since, ts: now)
                }
            case .failure(let error):
                RedisRefusal.log(logger, error, "webhook presence")
                // Restated (with whatever this node then holds) when the link is back.
                self.state.withLockedValue { s in
                    switch subject {
                    case .user: _ = s.dirtyUsers.insert(name)
                    case .room: _ = s.dirtyRooms.insert(name)
                    }
                }
            }
        }
    }

    private func cross(_ subject: PresenceSubject, _ name: String, present: Bool, presentForMs: Int64, ts: Int64) {
        handler.value?(PresenceCrossing(subject: subject, name: name, present: present, presentForMs: presentForMs, ts: ts))
    }

    /// The link to Redis is (back) up. The first time: sweep what this node id left from a
    /// previous run (killed, restarted under the same id: its users are announced offline),
    /// then state what it holds. Later: state again everything it holds (Redis may have
    /// restarted empty; what it already knew changes nothing) and what changed while it was down.
    func linkUp() {
        let first = state.withLockedValue { !$0.ready }
        if first {
            sweep(node: bus.nodeID).whenComplete { _ in self.restate() }
        } else {
            restate()
        }
    }

    private func restate() {
        guard bus.isUp else { return }
        state.withLockedValue { s in
            s.ready = true
            let users = s.localUsers.union(s.dirtyUsers), rooms = s.localRooms.union(s.dirtyRooms)
            s.dirtyUsers = []
            s.dirtyRooms = []
            for u in users { send(.user, u, present: s.localUsers.contains(u)) }
            for r in rooms { send(.room, r, present: s.localRooms.contains(r)) }
        }
    }

    /// Removes a node's users and rooms (a dead node's, claimed by this node; or this node's own
    /// leftovers) and hands on `user:offline` / `room:vacated` for those no node holds any more.
    @discardableResult
    package func sweep(node: String, announce: Bool = true) -> EventLoopFuture<Void> {
        sweepSet(.user, node: node, announce: announce).and(sweepSet(.room, node: node, announce: announce)).map { _ in () }
    }

    /// Up to `sweepChunk` members of the node's set at a time: one script per member (each in
    /// its own slot, pipelined), then they leave the set; until the set is empty. A member is
    /// removed from the set only after its script ran, so a sweep cut short is taken up again
    /// (the script is idempotent: a node that no longer holds the member changes nothing).
    private func sweepSet(_ subject: PresenceSubject, node: String, announce: Bool) -> EventLoopFuture<Void> {
        let set = WebhookScripts.nodeSet(subject, node)
        let redis = bus.redis
        return redis.send(["SRANDMEMBER", set, String(Self.sweepChunk)]).flatMap { reply in
            let members = (reply.elements ?? []).compactMap(\.string)
            guard !members.isEmpty else { return redis.eventLoop.makeSucceededVoidFuture() }
            let sweeps = members.map { name in
                redis.send(WebhookScripts.sweepMemberCommand(subject, name, node: node)).map { reply -> (String, Int64)? in
                    guard let items = reply.elements, items.count == 2, items[0].int == 1, let ms = items[1].int else { return nil }
                    return (name, ms)
                }
            }
            return EventLoopFuture.whenAllSucceed(sweeps, on: redis.eventLoop).flatMap { gone in
                let now = self.wallMs()
                if announce {
                    for case let (name, ms)? in gone { self.cross(subject, name, present: false, presentForMs: ms, ts: now) }
                }
                return redis.send(["SREM", set] + members).flatMap { _ in self.sweepSet(subject, node: node, announce: announce) }
            }
        }
    }
}
