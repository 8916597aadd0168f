import Foundation
import GRDB
import Logging
import NIOCore
import NIOPosix
import RelayCore

/// `ReceiptStore` on SQLite through GRDB: WAL, `synchronous=FULL`, one writer thread off the
/// event loops doing group commit, reads on a small thread pool.
public final class SQLiteReceiptStore: ReceiptStore, Sendable {
    public struct Options: Sendable {
        /// Most receipts in one transaction (the relay's `ReceiptSettings.maxBatch`).
        public var maxBatch: Int
        /// How long the writer waits for more receipts before committing a small batch, ms.
        /// 0 commits at once; batches still form while a commit is in flight.
        public var maxBatchWaitMs = 0
        /// Delete receipts older than this; `nil` keeps them forever.
        public var retentionDays: Int?
        /// How often retention runs, seconds.
        public var pruneIntervalSeconds = 3600
        /// Cluster mode: mark new receipts for replication through the Redis stream.
        public var replicate: Bool
        /// WAL frames (pages) past which the checkpointer makes the log start over (see
        /// `WALCheckpointer`): about 64 MiB with 4 KiB pages.
        public var walRestartFrames = 16_384
        /// How often the checkpointer copies the WAL back, seconds.
        public var walCheckpointIntervalSeconds = 0.5
        /// Called after each committed batch with its size, new receipts and commit time (ns).
        public var onCommit: (@Sendable (_ batch: Int, _ new: Int, _ nanoseconds: Int64) -> Void)?
        /// The rest are the store's own tuning, no setting of the relay's.
        public init(maxBatch: Int, retentionDays: Int?, replicate: Bool) {
            self.maxBatch = maxBatch
            self.retentionDays = retentionDays
            self.replicate = replicate
        }
    }

    private let pool: DatabasePool
    private let writer: ReceiptWriter
    private let options: Options
    private let readers: NIOThreadPool
    public let path: String

    /// Opens (creating if needed) the database at `path` and migrates it.
    public init(path: String, options: Options, wallClockMs: @escaping @Sendable () -> Int64 = { Int64(Date().timeIntervalSince1970 * 1000) }, logger: Logger = Logger(label: "relay.receipts")) throws {
        var config = Configuration()
        config.prepareDatabase { db in
            try db.execute(sql: "PRAGMA synchronous = FULL")
            // Keep the hot b-tree pages of the indexes in memory (64 MiB per connection at most),
            // and read pages through mmap rather than a copy per read.
            try db.execute(sql: "PRAGMA cache_size = -65536")
            try db.execute(sql: "PRAGMA mmap_size = 268435456")
            // Checkpoints run on their own thread (WALCheckpointer), not inside a commit.
            try db.execute(sql: "PRAGMA wal_autocheckpoint = 0")
            // A log that grew under load is cut back to this size when it starts over.
            try db.execute(sql: "PRAGMA journal_size_limit = 67108864")
        }
        config.busyMode = .timeout(5)
        let pool = try DatabasePool(path: path, configuration: config)
        // GRDB's pool sets `synchronous = NORMAL` on its writer when it turns WAL on, after
        // `prepareDatabase`: without FULL again, a commit (and the acks waiting on it) would
        // reach the disk only at the next checkpoint, and a power loss could undo it.
        try pool.writeWithoutTransaction { db in try db.execute(sql: "PRAGMA synchronous = FULL") }
        try ReceiptSchema.migrator.migrate(pool)
        self.pool = pool
        self.path = path
        self.options = options
        self.readers = NIOThreadPool(numberOfThreads: 2)
        self.readers.start()
        self.writer = ReceiptWriter(pool: pool, options: options, wallClockMs: wallClockMs, logger: logger)
        let writer = self.writer
        self.checkpointer = try WALCheckpointer(
            path: path, interval: options.walCheckpointIntervalSeconds, restartFrames: options.walRestartFrames, logger: logger,
            wantsRestart: { writer.requestWALRestart() })
    }

    private let checkpointer: WALCheckpointer

    /// The writer connection's `PRAGMA synchronous` (2 is FULL), for tests.
    func writerSynchronousLevel() throws -> Int? {
        try pool.writeWithoutTransaction { db in try Int.fetchOne(db, sql: "PRAGMA synchronous") }
    }

    public func record(_ receipt: NewReceipt, on eventLoop: any EventLoop) -> EventLoopFuture<RecordedReceipt> {
        let promise = eventLoop.makePromise(of: RecordedReceipt.self)
        writer.submit(receipt, promise: promise)
        return promise.futureResult
    }

    public func recordAll(_ receipts: [NewReceipt], on eventLoop: any EventLoop) -> EventLoopFuture<[RecordedReceipt]> {
        let items = receipts.map { ($0, eventLoop.makePromise(of: RecordedReceipt.self)) }
        writer.submit(items)
        return EventLoopFuture.whenAllSucceed(items.map { $0.1.futureResult }, on: eventLoop)
    }

    public func sync(authorID: String, since: Int64, limit: Int, on eventLoop: any EventLoop) -> EventLoopFuture<[Receipt]> {
        if options.replicate {
            // Cluster cursors: the `gid` every node agrees on (see ReceiptReplicator).
            return read(on: eventLoop) { db in
                try Self.fetch(db, sql: "SELECT gid AS id, room, message_id, author_id, user_id, kind, ts FROM receipt WHERE author_id = ? AND gid > ? ORDER BY gid LIMIT ?", arguments: [authorID, since, limit])
            }
        }
        return read(on: eventLoop) { db in
            try Self.fetch(db, sql: "SELECT * FROM receipt WHERE author_id = ? AND id > ? ORDER BY id LIMIT ?", arguments: [authorID, since, limit])
        }
    }

    // MARK: Cluster replication

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
        read(on: eventLoop) { db in try String.fetchOne(db, sql: "SELECT value FROM cluster_state WHERE key = 'stream'") ?? "0-0" }
    }

    /// What this node knows about the replication stream, kept in `cluster_state` so that a
    /// restarted node can tell whether Redis lost what it had accepted (see ReceiptReplicator).
    public struct ReplicationState: Equatable, Sendable {
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

    public func replicationState(on eventLoop: any EventLoop) -> EventLoopFuture<ReplicationState> {
        read(on: eventLoop) { db in
            var values: [String: String] = [:]
            for row in try Row.fetchAll(db, sql: "SELECT key, value FROM cluster_state") {
                if let key: String = row["key"], let value: String = row["value"] { values[key] = value }
            }
            var state = ReplicationState()
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
        read(on: eventLoop) { db in
            try Row.fetchAll(db, sql: "SELECT * FROM receipt WHERE replicated = 0 ORDER BY id LIMIT ?", arguments: [limit]).compactMap { row in
                Self.receipt(from: row).map { PendingReplica(receipt: $0, origin: row["origin"]) }
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
    public func replayAfterLoss(above floorGID: Int64, state: ReplicationState, on eventLoop: any EventLoop) -> EventLoopFuture<Int> {
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

    public func receipts(messageID: String, limit: Int, on eventLoop: any EventLoop) -> EventLoopFuture<[Receipt]> {
        read(on: eventLoop) { db in
            try Self.fetch(db, sql: "SELECT * FROM receipt WHERE message_id = ? ORDER BY id LIMIT ?", arguments: [messageID, limit])
        }
    }

    private func read<T: Sendable>(on eventLoop: any EventLoop, _ body: @escaping @Sendable (Database) throws -> T) -> EventLoopFuture<T> {
        let pool = self.pool
        return readers.runIfActive(eventLoop: eventLoop) {
            do {
                return try pool.read(body)
            } catch {
                throw ReceiptStoreError.unavailable(String(describing: error))
            }
        }
    }

    static func fetch(_ db: Database, sql: String, arguments: StatementArguments) throws -> [Receipt] {
        try Row.fetchAll(db, sql: sql, arguments: arguments).compactMap(Self.receipt(from:))
    }

    static func receipt(from row: Row) -> Receipt? {
        guard let kind = ReceiptKind(rawValue: row["kind"]) else { return nil }
        return Receipt(id: row["id"], room: row["room"], messageID: row["message_id"], authorID: row["author_id"], userID: row["user_id"], kind: kind, ts: row["ts"])
    }

    /// Readiness: a real write transaction on the database (disk full, read-only, locked → fails).
    public func checkWritable(on eventLoop: any EventLoop) -> EventLoopFuture<Void> {
        let pool = self.pool
        return readers.runIfActive(eventLoop: eventLoop) {
            do {
                try pool.write { db in
                    try db.execute(sql: "INSERT OR REPLACE INTO health (id, ts) VALUES (1, ?)", arguments: [Int64(Date().timeIntervalSince1970 * 1000)])
                }
            } catch {
                throw ReceiptStoreError.unavailable(String(describing: error))
            }
        }
    }

    /// Commits what is pending, then stops the writer and the readers.
    public func close() async {
        await writer.stop()
        checkpointer.stop()
        try? await readers.shutdownGracefully()
    }

    /// Runs retention once now (tests and operators); returns rows deleted.
    public func pruneNow(olderThanMs cutoff: Int64) throws -> Int {
        try writer.prune(olderThan: cutoff)
    }

    /// A consistent copy of the live database to `destination` (SQLite online backup).
    public func backup(to destination: String) throws {
        let target = try DatabaseQueue(path: destination)
        try pool.backup(to: target)
    }
}
