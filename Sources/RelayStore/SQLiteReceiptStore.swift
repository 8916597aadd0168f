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
    /// Cluster mode: what this node knows of the receipts' Redis stream, in the same file.
    public let replication: ReplicationLedger

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
        self.replication = ReplicationLedger(pool: pool, readers: readers)
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
            return readers.read(pool, on: eventLoop) { db in
                try Self.fetch(db, sql: "SELECT gid AS id, room, message_id, author_id, user_id, kind, ts FROM receipt WHERE author_id = ? AND gid > ? ORDER BY gid LIMIT ?", arguments: [authorID, since, limit])
            }
        }
        return readers.read(pool, on: eventLoop) { db in
            try Self.fetch(db, sql: "SELECT * FROM receipt WHERE author_id = ? AND id > ? ORDER BY id LIMIT ?", arguments: [authorID, since, limit])
        }
    }

    public func receipts(messageID: String, limit: Int, on eventLoop: any EventLoop) -> EventLoopFuture<[Receipt]> {
        readers.read(pool, on: eventLoop) { db in
            try Self.fetch(db, sql: "SELECT * FROM receipt WHERE message_id = ? ORDER BY id LIMIT ?", arguments: [messageID, limit])
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
