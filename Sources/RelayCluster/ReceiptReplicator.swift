import Dispatch
import Logging
import NIOCore
import RelayBackends
import RelayCore
import RelayRedis
import RelayStore
import RelayLocks

/// Cluster mode: every node keeps every node's receipts, so `receipt:sync` on any node returns
/// receipts acked on any node.
///
/// A receipt is durable on the node that acked it (its SQLite, as on a single node). The
/// replicator then appends it to the Redis stream `relay:receipts`; every node reads the stream
/// in order (XRANGE from its persisted position) and stores what it reads. The stream entry id
/// becomes the receipt's cluster cursor (`gid`): the same on every node, and the cursor
/// `receipt:sync` pages by in cluster mode. While Redis is down, receipts wait in each node's
/// SQLite (`replicated = 0`) and go out when it returns.
///
/// Redis losing data (restarted without persistence, or a failover to a replica that had not
/// got the last writes) must not lose receipts it had accepted but some node had not read yet.
/// Each round is one script (`ReceiptScripts.round`) that checks, before appending, that Redis
/// still has what it confirmed to this node: the epoch, this node's push counter and the read
/// position it published. A node that finds them gone declares a new epoch; every node that
/// sees a new epoch sends again every receipt it holds above its *watermark* (a stream id every
/// live node had read and committed, measured from the published positions) and rewinds its
/// read position, so the receipts some node lacked reach it under new, larger cursors. Nodes
/// that had them keep them ((messageId, userId, kind) is unique): a cursor reader may see a
/// receipt twice, never misses one.
///
/// `start` and `stop` may come from any thread; the rounds run on the Redis client's loop. What
/// they share is behind one lock, held only to read or set it.
package final class ReceiptReplicator: Sendable {
    package static let stream = ReceiptScripts.stream
    package static let batch = 500
    /// The stream is trimmed to about this many entries.
    package static let maxLength = 1_000_000
    /// Rounds between two watermark measurements.
    package static let watermarkEvery = 10

    package let store: SQLiteReceiptStore
    package let redis: RedisClient
    package let nodeID: String
    package let logger: Logger
    private struct State {
        var task: RepeatedTask?
        /// A round is under way (push, then pull).
        var running = false
        /// What this node knows of the stream, once loaded from the store.
        var replication: ReplicationLedger.State?
        var watermark: ReceiptWatermark
        var rounds = 0
        /// The last pull filled a whole batch: add less while reading on (after a loss every node
        /// sends its receipts again, and the stream, trimmed to `maxLength`, must not outgrow
        /// its readers).
        var behind = false
    }

    private let state: AuditedLock<State>

    /// `watermarkDelayMs`: how old a watermark measurement must be before it is used (longer
    /// than a node takes to notice a loss once Redis is back: its reconnect backoff and a round).
    package init(store: SQLiteReceiptStore, redis: RedisClient, nodeID: String, watermarkDelayMs: Int64 = 10_000, logger: Logger) {
        self.store = store
        self.redis = redis
        self.nodeID = nodeID
        self.logger = logger
        self.state = AuditedLock(State(watermark: ReceiptWatermark(delayMs: watermarkDelayMs)))
    }

    package var eventLoop: any EventLoop { redis.eventLoop }

    package func start(every interval: TimeAmount = .milliseconds(100)) {
        let task = eventLoop.scheduleRepeatedTask(initialDelay: interval, delay: interval) { [weak self] _ in self?.tick() }
        state.withLockedValue { $0.task = task }
    }

    package func stop() { state.withLockedValue { $0.task }?.cancel() }

    /// One round: check Redis and push this node's pending receipts, then pull what the stream has.
    private func tick() {
        guard redis.isUp else { return }
        let began = state.withLockedValue { s -> Bool in
            guard !s.running else { return false }
            s.running = true
            return true
        }
        guard began else { return }
        round().whenComplete { [weak self] result in
            guard let self else { return }
            self.state.withLockedValue { $0.running = false }
            if case .failure(let error) = result { self.logger.debug("receipt replication paused", metadata: ["error": "\(error)"]) }
        }
    }

    /// Runs one round now (tests); completes when it is done.
    package func roundNow() -> EventLoopFuture<Void> {
        eventLoop.flatSubmit { self.round() }
    }

    private func replication() -> EventLoopFuture<ReplicationLedger.State> {
        if let known = state.withLockedValue({ $0.replication }) { return eventLoop.makeSucceededFuture(known) }
        return store.replication.replicationState(on: eventLoop).map { loaded in
            self.state.withLockedValue { s in
                if s.replication == nil { s.replication = loaded }
                return s.replication ?? loaded
            }
        }
    }

    private func update(_ body: (inout ReplicationLedger.State) -> Void) {
        state.withLockedValue { s in
            guard var r = s.replication else { return }
            body(&r)
            s.replication = r
        }
    }

    private func round() -> EventLoopFuture<Void> {
        replication().flatMap { known in
            // Behind in the stream: a tenth of a batch, so that this node's receipts still go
            // out but the stream grows no faster than it is read.
            let limit = self.state.withLockedValue { $0.behind } ? Self.batch / 10 : Self.batch
            return self.store.replication.pendingReplicas(limit: limit, on: self.eventLoop).flatMap { pending in self.push(pending, known: known) }
        }.flatMap { fine in
            guard fine else { return self.eventLoop.makeSucceededVoidFuture() }
            return self.pull().flatMap { self.measureWatermark() }
        }
    }

    /// The round's script; `false` when a loss was found and handled (the round ends there).
    private func push(_ pending: [ReplicationLedger.PendingReplica], known: ReplicationLedger.State) -> EventLoopFuture<Bool> {
        let floor = ReceiptRecovery.floor(known)
        var args = ["EVAL", ReceiptScripts.round, String(ReceiptScripts.keys.count)] + ReceiptScripts.keys
        args += [nodeID, known.epoch, String(known.seq), known.published, known.streamID, floor.description, Self.token(), String(Self.maxLength)]
        for p in pending { args += [p.origin ?? nodeID, JSONWriter.string(p.receipt.json)] }
        return redis.send(args).flatMap { value in
            guard let reply = ReceiptRoundReply(value) else {
                return self.eventLoop.makeFailedFuture(RESPError.server("unexpected receipt round reply"))
            }
            switch reply {
            case .ok(let epoch, let seq, _):
                return self.store.replication.markReplicated(pending.map(\.receipt.id), epoch: epoch, seq: seq, published: known.streamID, on: self.eventLoop).map {
                    self.update { r in
                        r.epoch = epoch
                        r.seq = seq
                        r.published = known.streamID
                    }
                    return true
                }
            case .lost(let loss):
                return self.recover(known, loss).map { false }
            }
        }
    }

    private func recover(_ known: ReplicationLedger.State, _ loss: ReceiptRoundReply.Loss) -> EventLoopFuture<Void> {
        let (floor, next) = ReceiptRecovery.recovered(known, after: loss)
        return store.replication.replayAfterLoss(above: floor.gid, state: next, on: eventLoop).map { requeued in
            self.state.withLockedValue { s in
                s.replication = next
                s.watermark.reset()
            }
            self.logger.warning(
                loss.declared ? "Redis lost receipts it had accepted; sending again what may be missing" : "another node found that Redis lost receipts; sending again what may be missing",
                metadata: ["floor": "\(floor)", "requeued": "\(requeued)", "position": "\(next.streamID)"])
        }
    }

    private func pull() -> EventLoopFuture<Void> {
        replication().flatMap { known in
            let from = known.streamID
            return self.redis.send(["XRANGE", Self.stream, "(" + from, "+", "COUNT", String(Self.batch)]).flatMap { reply in
                let read = reply.elements ?? []
                self.state.withLockedValue { $0.behind = read.count >= Self.batch }
                let entries = read.compactMap(Self.entry)
                guard let last = entries.last else { return self.eventLoop.makeSucceededVoidFuture() }
                return self.store.replication.applyReplicated(entries.map { ($0.gid, $0.origin, $0.receipt) }, lastStreamID: last.id, on: self.eventLoop).map { _ in
                    self.update { r in
                        // A loss handled meanwhile rewound the position: keep that.
                        if r.streamID == from { r.streamID = last.id }
                    }
                }
            }
        }
    }

    /// Every few rounds: the lowest position over the live nodes, kept once it is old enough.
    private func measureWatermark() -> EventLoopFuture<Void> {
        let due = state.withLockedValue { s -> Bool in
            s.rounds += 1
            return s.rounds % Self.watermarkEvery == 0
        }
        guard due else { return eventLoop.makeSucceededVoidFuture() }
        let now = Self.nowMs()
        return redis.send(["ZRANGE", ClusterKeys.nodes, "0", "-1"]).flatMap { members in
            self.redis.send(["HGETALL", ReceiptScripts.pos]).map { positions in
                ((members.elements ?? []).compactMap(\.string), Self.pairs(positions))
            }
        }.flatMap { (members: [String], positions: [String: String]) -> EventLoopFuture<Void> in
            let settled = self.state.withLockedValue { s -> ReceiptStreamID? in
                if let measured = ReceiptWatermark.measure(members: members, positions: positions) { s.watermark.offer(measured, at: now) }
                return s.watermark.settled(at: now)
            }
            guard let settled, let known = self.state.withLockedValue({ $0.replication }), settled.description != known.watermark else {
                return self.eventLoop.makeSucceededVoidFuture()
            }
            return self.store.replication.saveWatermark(settled.description, on: self.eventLoop).map {
                self.update { $0.watermark = settled.description }
            }
        }
    }

    /// A RESP3 map or a RESP2 flat array of strings.
    package static func pairs(_ value: RESPValue) -> [String: String] {
        var out: [String: String] = [:]
        for (k, v) in value.pairs { if let k = k.string, let v = v.string { out[k] = v } }
        return out
    }

    private static func token() -> String {
        String(UInt64.random(in: 1...UInt64.max), radix: 16) + String(UInt64.random(in: 0...UInt64.max), radix: 16)
    }

    private static func nowMs() -> Int64 {
        Int64(DispatchTime.now().uptimeNanoseconds / 1_000_000)
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
        ReceiptStreamID(id)?.gid
    }
}
