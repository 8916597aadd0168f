import RelayRedis
import RelayStore

/// The answer of one replication round (`ReceiptScripts.round`), read defensively: anything
/// malformed is `nil` and the round is simply tried again.
package enum ReceiptRoundReply: Equatable, Sendable {
    /// Redis has what this node gave it: the position was published and `ids` appended.
    case ok(epoch: String, seq: Int64, ids: [String])
    /// Redis lost entries it had accepted; `declared`: this node found it (else another node did).
    case lost(Loss)

    package struct Loss: Equatable, Sendable {
        package var declared: Bool
        package var epoch: String
        /// The floor the epoch was declared with (`""`: none known).
        package var from: String
        /// This node's counter and published position as Redis has them now.
        package var seq: Int64
        package var published: String
        /// The stream's last entry now (`0-0`: empty).
        package var top: String

        package init(declared: Bool, epoch: String, from: String, seq: Int64, published: String, top: String) {
            self.declared = declared
            self.epoch = epoch
            self.from = from
            self.seq = seq
            self.published = published
            self.top = top
        }
    }

    package init?(_ value: RESPValue) {
        guard let items = value.elements, items.count >= 3, let kind = items[0].string, let epoch = items[1].string, !epoch.isEmpty else { return nil }
        switch kind {
        case "ok":
            let ids = items.dropFirst(3).compactMap(\.string)
            guard let seq = Self.integer(items[2]), ids.count == items.count - 3 else { return nil }
            self = .ok(epoch: epoch, seq: seq, ids: ids)
        case "lost", "changed":
            guard items.count == 6, let from = items[2].string, let seq = Self.integer(items[3]), let published = items[4].string, let top = items[5].string else { return nil }
            self = .lost(Loss(declared: kind == "lost", epoch: epoch, from: from, seq: seq, published: published, top: top))
        default:
            return nil
        }
    }

    private static func integer(_ value: RESPValue) -> Int64? {
        if let n = value.int { return n }
        return value.string.flatMap { Int64($0) }
    }
}

/// What a node does after a loss: the pure part, tested on its own.
package enum ReceiptRecovery {
    /// The floor this node replays from: the lowest of its watermark, its read position and the
    /// floor the epoch was declared with. (The declared floor is another node's watermark; a
    /// node that had read less was not counted in it, so its own position counts too.)
    package static func floor(_ state: ReplicationLedger.State, declaredFrom: String = "") -> ReceiptStreamID {
        var floor = min(ReceiptStreamID(state.watermark) ?? .zero, ReceiptStreamID(state.streamID) ?? .zero)
        if let from = ReceiptStreamID(declaredFrom) { floor = min(floor, from) }
        return floor
    }

    /// The node's state after handling `loss`: the new epoch, the counter and published position
    /// Redis has now, and the read position rewound to the floor — or to the stream's end when
    /// that is lower (the stream restarted; every entry appended from now on is above its end).
    package static func recovered(_ state: ReplicationLedger.State, after loss: ReceiptRoundReply.Loss) -> (floor: ReceiptStreamID, state: ReplicationLedger.State) {
        let floor = floor(state, declaredFrom: loss.from)
        var next = state
        next.epoch = loss.epoch
        next.seq = loss.seq
        next.published = loss.published
        next.streamID = min(floor, ReceiptStreamID(loss.top) ?? .zero).description
        // Receipts above the floor lose their cursor and are counted again from the stream.
        next.watermark = min(ReceiptStreamID(state.watermark) ?? .zero, floor).description
        return (floor, next)
    }
}

/// The "everywhere" watermark: the lowest read position over the live nodes (members of
/// `relay:nodes`, which heartbeats fill and sweeps empty), used only once it is `delayMs` old —
/// a watermark measured after Redis lost data but before any node noticed could count entries
/// that are gone, and the nodes that notice do so at their first round after Redis is back.
package struct ReceiptWatermark: Sendable {
    package let delayMs: Int64
    private var candidates: [(at: Int64, id: ReceiptStreamID)] = []

    package init(delayMs: Int64) { self.delayMs = delayMs }

    /// The minimum position over `members`; `nil` when a member has not published one (a node
    /// that just started or has not read yet: nothing can be said about it) or there are none.
    package static func measure(members: [String], positions: [String: String]) -> ReceiptStreamID? {
        guard !members.isEmpty else { return nil }
        var low: ReceiptStreamID?
        for member in members {
            guard let text = positions[member], let id = ReceiptStreamID(text) else { return nil }
            low = min(low ?? id, id)
        }
        return low
    }

    /// Records a measurement taken at `now` (ms, any monotonic clock).
    package mutating func offer(_ id: ReceiptStreamID, at now: Int64) {
        candidates.append((now, id))
        if candidates.count > 1_000 { candidates.removeFirst(candidates.count - 1_000) }
    }

    /// The newest measurement at least `delayMs` old (older ones are dropped), if any.
    package mutating func settled(at now: Int64) -> ReceiptStreamID? {
        guard let last = candidates.lastIndex(where: { now - $0.at >= delayMs }) else { return nil }
        let id = candidates[last].id
        candidates.removeFirst(last + 1)
        return id
    }

    /// A loss was handled: nothing measured before it may be used.
    package mutating func reset() { candidates.removeAll() }
}
