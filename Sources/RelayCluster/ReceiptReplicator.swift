import Logging
import NIOCore
import RelayBackends
import RelayCore
import RelayRedis
import RelayStore

/// Cluster mode: every node keeps every node's receipts, so `receipt:sync` on any node returns
/// receipts acked on any node.
///
/// A receipt is durable on the node that acked it (its SQLite, as on a single node). The
/// replicator then appends it to the Redis stream `relay:receipts` (XADD); every node reads
/// the stream in order (XRANGE from its persisted position) and stores what it reads. The
/// stream entry id becomes the receipt's cluster cursor (`gid`): the same on every node, and
/// the cursor `receipt:sync` pages by in cluster mode. While Redis is down, receipts wait in
/// each node's SQLite (`replicated = 0`) and go out when it returns.
///
/// `start` and `stop` may come from any thread; the rounds run on the Redis client's loop. What
/// they share is behind one lock, held only to read or set it.
package final class ReceiptReplicator: Sendable {
    package static let stream = "relay:receipts"
    package static let batch = 500
    /// The stream is trimmed to about this many entries.
    package static let maxLength = 1_000_000

    package let store: SQLiteReceiptStore
    package let redis: RedisClient
    package let nodeID: String
    package let logger: Logger
    private struct State {
        var task: RepeatedTask?
        /// A round is under way (push, then pull).
        var running = false
        /// Where this node is in the stream, once read.
        var lastID: String?
    }

    private let state = AuditedLock(State())

    package init(store: SQLiteReceiptStore, redis: RedisClient, nodeID: String, logger: Logger) {
        self.store = store
        self.redis = redis
        self.nodeID = nodeID
        self.logger = logger
    }

    package var eventLoop: any EventLoop { redis.eventLoop }

    package func start(every interval: TimeAmount = .milliseconds(100)) {
        let task = eventLoop.scheduleRepeatedTask(initialDelay: interval, delay: interval) { [weak self] _ in self?.tick() }
        state.withLockedValue { $0.task = task }
    }

    package func stop() { state.withLockedValue { $0.task }?.cancel() }

    /// One round: push this node's pending receipts, then pull what the stream has.
    private func tick() {
        guard redis.isUp else { return }
        let began = state.withLockedValue { s -> Bool in
            guard !s.running else { return false }
            s.running = true
            return true
        }
        guard began else { return }
        push().flatMap { self.pull() }.whenComplete { [weak self] result in
            guard let self else { return }
            self.state.withLockedValue { $0.running = false }
            if case .failure(let error) = result { self.logger.debug("receipt replication paused", metadata: ["error": "\(error)"]) }
        }
    }

    private func push() -> EventLoopFuture<Void> {
        store.pendingReplication(limit: Self.batch, on: eventLoop).flatMap { pending in
            guard !pending.isEmpty else { return self.eventLoop.makeSucceededVoidFuture() }
            let adds = pending.map { r in
                self.redis.send(["XADD", Self.stream, "MAXLEN", "~", String(Self.maxLength), "*", "o", self.nodeID, "r", JSONWriter.string(r.json)])
            }
            return EventLoopFuture.whenAllSucceed(adds, on: self.eventLoop).flatMap { _ in
                self.store.markReplicated(pending.map(\.id), on: self.eventLoop)
            }
        }
    }

    private func pull() -> EventLoopFuture<Void> {
        let known = state.withLockedValue { $0.lastID }
        let position: EventLoopFuture<String> = known.map { eventLoop.makeSucceededFuture($0) } ?? store.lastStreamID(on: eventLoop)
        return position.flatMap { from in
            self.redis.send(["XRANGE", Self.stream, "(" + from, "+", "COUNT", String(Self.batch)]).flatMap { reply in
                let entries = (reply.elements ?? []).compactMap(Self.entry)
                guard let last = entries.last else {
                    self.state.withLockedValue { $0.lastID = from }
                    return self.eventLoop.makeSucceededVoidFuture()
                }
                return self.store.applyReplicated(entries.map { ($0.gid, $0.origin, $0.receipt) }, lastStreamID: last.id, on: self.eventLoop).map { _ in
                    self.state.withLockedValue { $0.lastID = last.id }
                }
            }
        }
    }

    package struct Entry {
        var id: String
        var gid: Int64
        var origin: String
        var receipt: NewReceipt
    }

    /// `[id, [field, value, …]]` → an entry; malformed entries are skipped.
    package static func entry(_ value: RESPValue) -> Entry? {
        guard let pair = value.elements, pair.count == 2, let id = pair[0].string, let fields = pair[1].elements, let gid = gid(id) else { return nil }
        var origin: String?
        var body: String?
        var i = 0
        while i + 1 < fields.count {
            switch fields[i].string {
            case "o": origin = fields[i + 1].string
            case "r": body = fields[i + 1].string
            default: break
            }
            i += 2
        }
        guard let origin, let body, let json = try? JSONParser.parse(body),
            let room = json["room"]?.stringValue, let message = json["messageId"]?.stringValue, let author = json["authorId"]?.stringValue,
            let user = json["userId"]?.stringValue, let kind = json["kind"]?.stringValue.flatMap(ReceiptKind.init(rawValue:)), let ts = json["ts"]?.intValue
        else { return nil }
        return Entry(id: id, gid: gid, origin: origin, receipt: NewReceipt(room: room, messageID: message, authorID: author, userID: user, kind: kind, ts: ts))
    }

    /// Stream id `ms-seq` → one integer cursor: `ms · 65536 + seq` (below 2^53, exact in JSON).
    package static func gid(_ id: String) -> Int64? {
        let parts = id.split(separator: "-")
        guard parts.count == 2, let ms = Int64(parts[0]), let seq = Int64(parts[1]) else { return nil }
        return ms * 65_536 + min(seq, 65_535)
    }
}
