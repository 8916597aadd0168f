import GRDB
import NIOCore
import NIOPosix
import RelayCore

/// What a node knows of the cluster's receipt stream, kept in the receipts' SQLite file
/// (`cluster_state`, and each receipt's `gid`, `origin` and `replicated`) so that a restarted
/// node can tell whether Redis lost what it had accepted (see `ReceiptReplicator`). Apart from
/// the receipt store, whose writer thread commits the receipts themselves: these are the
/// replicator's small writes and reads, run on the store's reader threads through GRDB's
/// serialized writer, never on an event loop.
public final class ReplicationLedger: Sendable {
    private let pool: DatabasePool
    private let readers: NIOThreadPool

    init(pool: DatabasePool, readers: NIOThreadPool) {
        self.pool = pool
        self.readers = readers
    }

    /// Applies receipts read from the stream (every node's, this one's included) and the stream
    /// position, in one transaction. The first stream entry of a (messageId, userId, kind) sets
    /// its `gid` on every node; later duplicates change nothing.
    public func applyReplicated(_ entries: [(gid: Int64, origin: String, receipt: NewReceipt)], lastStreamID: String, on eventLoop: any EventLoop) -> EventLoopFuture<Int> {
        let pool = self.pool
        return readers.runIfActive(eventLoop: eventLoop) {
            try pool.write { db -> Int in
                let upsert = try db.cachedStatement(sql: """
                    INSERT INTO receipt (room, message_id, author_id, user_id, kind, ts, gid, origin, replicated)
                    VALUES (?, ?, ?, ?, ?, ?, ?, ?, 1)
                    ON CONFLICT (message_id, user_id, kind) DO UPDATE SET gid = excluded.gid WHERE receipt.gid IS NULL
                    """)
                var changed = 0
                for e in entries {
                    let r = e.receipt
                    try upsert.execute(arguments: [r.room, r.messageID, r.authorID, r.userID, r.kind.rawValue, r.ts, e.gid, e.origin])
                    changed += db.changesCount
                }
                try db.execute(sql: "INSERT INTO cluster_state (key, value) VALUES ('stream', ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value", arguments: [lastStreamID])
                return changed
            }
        }
    }

    /// The last stream entry this node applied (`0-0` before the first).
    public func lastStreamID(on eventLoop: any EventLoop) -> EventLoopFuture<String> {
        readers.read(pool, on: eventLoop) { db in try String.fetchOne(db, sql: "SELECT value FROM cluster_state WHERE key = 'stream'") ?? "0-0" }
    }

    /// What this node knows about the replication stream, kept in `cluster_state` so that a
    /// restarted node can tell whether Redis lost what it had accepted (see ReceiptReplicator).
    public struct State: Equatable, Sendable {
        /// The last stream entry this node applied (its read position).
        public var streamID = "0-0"
        /// The replication epoch this node last saw (`""`: none yet).
        public var epoch = ""
        /// This node's push counter as Redis last confirmed it.
        public var seq: Int64 = 0
        /// The read position this node last published to Redis (`""`: none yet).
        public var published = ""
        /// A stream id every live node had read up to (every receipt at or below it was on
        /// every live node's disk when it was measured).
        public var watermark = "0-0"

        public init(streamID: String = "0-0", epoch: String = "", seq: Int64 = 0, published: String = "", watermark: String = "0-0") {
            self.streamID = streamID
            self.epoch = epoch
            self.seq = seq
            self.published = published
            self.watermark = watermark
        }
    }

    public func replicationState(on eventLoop: any EventLoop) -> EventLoopFuture<State> {
        readers.read(pool, on: eventLoop) { db in
            var values: [String: String] = [:]
            for row in try Row.fetchAll(db, sql: "SELECT key, value FROM cluster_state") {
                if let key: String = row["key"], let value: String = row["value"] { values[key] = value }
            }
            var state = State()
            if let v = values["stream"] { state.streamID = v }
            if let v = values["epoch"] { state.epoch = v }
            if let v = values["seq"].flatMap({ Int64($0) }) { state.seq = v }
            if let v = values["published"] { state.published = v }
            if let v = values["watermark"] { state.watermark = v }
            return state
        }
    }

    /// A receipt waiting to go (again) into the stream, with the node that acked it (`nil`: this one).
    public struct PendingReplica: Equatable, Sendable {
        public var receipt: Receipt
        public var origin: String?
    }

    /// Receipts waiting for the stream (this node's new ones, and after a Redis data loss every
    /// receipt this node re-sends), oldest first.
    public func pendingReplicas(limit: Int, on eventLoop: any EventLoop) -> EventLoopFuture<[PendingReplica]> {
        readers.read(pool, on: eventLoop) { db in
            try Row.fetchAll(db, sql: "SELECT * FROM receipt WHERE replicated = 0 ORDER BY id LIMIT ?", arguments: [limit]).compactMap { row in
                SQLiteReceiptStore.receipt(from: row).map { PendingReplica(receipt: $0, origin: row["origin"]) }
            }
        }
    }

    /// Marks receipts as in the stream and records what Redis confirmed, in one transaction.
    public func markReplicated(_ ids: [Int64], epoch: String, seq: Int64, published: String, on eventLoop: any EventLoop) -> EventLoopFuture<Void> {
        let pool = self.pool
        return readers.runIfActive(eventLoop: eventLoop) {
            try pool.write { db in
                for id in ids { try db.execute(sql: "UPDATE receipt SET replicated = 1 WHERE id = ?", arguments: [id]) }
                try Self.save(db, ["epoch": epoch, "seq": String(seq), "published": published])
            }
        }
    }

    public func saveWatermark(_ watermark: String, on eventLoop: any EventLoop) -> EventLoopFuture<Void> {
        let pool = self.pool
        return readers.runIfActive(eventLoop: eventLoop) {
            try pool.write { db in try Self.save(db, ["watermark": watermark]) }
        }
    }

    /// After Redis lost entries it had accepted: every receipt above `floorGID` (a cluster
    /// cursor every live node had) or without a cursor yet goes out again, and forgets its cursor
    /// until the stream hands it a new one — so that a cursor at or below a later watermark
    /// always names a stream entry every node read. Saves `state` (the new epoch, the counters
    /// Redis now has, the rewound read position) in the same transaction; returns the receipts
    /// queued again.
    public func replayAfterLoss(above floorGID: Int64, state: State, on eventLoop: any EventLoop) -> EventLoopFuture<Int> {
        let pool = self.pool
        return readers.runIfActive(eventLoop: eventLoop) {
            try pool.write { db -> Int in
                try db.execute(sql: "UPDATE receipt SET gid = NULL, replicated = 0 WHERE gid IS NULL OR gid > ?", arguments: [floorGID])
                let changed = db.changesCount
                try Self.save(db, [
                    "stream": state.streamID, "epoch": state.epoch, "seq": String(state.seq), "published": state.published, "watermark": state.watermark,
                ])
                return changed
            }
        }
    }

    private static func save(_ db: Database, _ values: [String: String]) throws {
        for (key, value) in values.sorted(by: { $0.key < $1.key }) {
            try db.execute(sql: "INSERT INTO cluster_state (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value", arguments: [key, value])
        }
    }
}
