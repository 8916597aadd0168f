import Foundation
import GRDB
import NIOCore
import NIOPosix
import RelayCore
import XCTest

@testable import RelayStore

final class SQLiteReceiptStoreTests: XCTestCase {
    var group: MultiThreadedEventLoopGroup!
    var directory: URL!

    override func setUp() {
        group = MultiThreadedEventLoopGroup(numberOfThreads: 2)
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("relay-store-\(UUID().uuidString)")
        try? FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    }

    override func tearDown() {
        try? group.syncShutdownGracefully()
        try? FileManager.default.removeItem(at: directory)
    }

    func makeStore(_ options: SQLiteReceiptStore.Options = .init(maxBatch: 1024, retentionDays: nil, replicate: false)) throws -> SQLiteReceiptStore {
        try SQLiteReceiptStore(path: directory.appendingPathComponent("r.sqlite").path, options: options)
    }

    func receipt(_ message: String, user: String = "bob", author: String = "alice", kind: ReceiptKind = .delivered, ts: Int64 = 1000) -> NewReceipt {
        NewReceipt(room: "conversation:1", messageID: message, authorID: author, userID: user, kind: kind, ts: ts)
    }

    func testRecordReturnsIncreasingCursorsAndIsIdempotent() async throws {
        let store = try makeStore()
        let loop = group.next()
        let a = try await store.record(receipt("m1"), on: loop).get()
        let b = try await store.record(receipt("m2"), on: loop).get()
        let again = try await store.record(receipt("m1"), on: loop).get()
        XCTAssertTrue(a.isNew)
        XCTAssertTrue(b.isNew)
        XCTAssertGreaterThan(b.receipt.id, a.receipt.id)
        XCTAssertFalse(again.isNew)
        XCTAssertEqual(again.receipt, a.receipt)
        let read = try await store.record(receipt("m1", kind: .read), on: loop).get()
        XCTAssertTrue(read.isNew, "delivered and read are separate receipts")
        let all = try await store.receipts(messageID: "m1", limit: 10, on: loop).get()
        XCTAssertEqual(all.map(\.kind), [.delivered, .read])
        await store.close()
    }

    func testFutureCompletesOnTheCallersLoop() async throws {
        let store = try makeStore()
        let loop = group.next()
        let onLoop = try await store.record(receipt("m1"), on: loop).map { _ in loop.inEventLoop }.get()
        XCTAssertTrue(onLoop)
        await store.close()
    }

    func testConcurrentReceiptsAreAllStoredOnceEach() async throws {
        let store = try makeStore()
        let futures = (0..<2000).map { i in store.record(receipt("m\(i % 1000)", user: "u\(i / 1000)"), on: group.next()) }
        var ids = Set<Int64>()
        for f in futures { ids.insert(try await f.get().receipt.id) }
        XCTAssertEqual(ids.count, 2000)
        let all = try await store.sync(authorID: "alice", since: 0, limit: 5000, on: group.next()).get()
        XCTAssertEqual(all.count, 2000)
        XCTAssertEqual(all.map(\.id), all.map(\.id).sorted())
        let page = try await store.sync(authorID: "alice", since: 0, limit: 1500, on: group.next()).get()
        XCTAssertEqual(page.count, 1500, "sync is capped by the limit passed in")
        await store.close()
    }

    func testSyncPagesInCursorOrderForTheAuthorOnly() async throws {
        let store = try makeStore()
        let loop = group.next()
        for i in 0..<5 { _ = try await store.record(receipt("a\(i)"), on: loop).get() }
        _ = try await store.record(receipt("x", author: "carol"), on: loop).get()
        let first = try await store.sync(authorID: "alice", since: 0, limit: 2, on: loop).get()
        XCTAssertEqual(first.map(\.messageID), ["a0", "a1"])
        let second = try await store.sync(authorID: "alice", since: first.last!.id, limit: 10, on: loop).get()
        XCTAssertEqual(second.map(\.messageID), ["a2", "a3", "a4"])
        XCTAssertTrue(second.allSatisfy { $0.authorID == "alice" })
        await store.close()
    }

    func testReceiptsSurviveReopen() async throws {
        let store = try makeStore()
        let stored = try await store.record(receipt("m1"), on: group.next()).get()
        await store.close()
        let reopened = try makeStore()
        let found = try await reopened.receipts(messageID: "m1", limit: 10, on: group.next()).get()
        XCTAssertEqual(found, [stored.receipt])
        await reopened.close()
    }

    func testDatabaseIsWALWithFullSync() async throws {
        let store = try makeStore()
        _ = try await store.record(receipt("m1"), on: group.next()).get()
        await store.close()
        let queue = try DatabaseQueue(path: directory.appendingPathComponent("r.sqlite").path)
        let mode: String? = try queue.inDatabase { try String.fetchOne($0, sql: "PRAGMA journal_mode") }
        XCTAssertEqual(mode, "wal")
    }

    /// GRDB's pool turns its writer to `synchronous = NORMAL` when it sets WAL up; the store
    /// sets FULL again, so every commit (and the acks waiting on it) is on disk.
    func testTheWriterCommitsWithFullSync() async throws {
        let store = try makeStore()
        XCTAssertEqual(try store.writerSynchronousLevel(), 2, "PRAGMA synchronous on the writer: 2 is FULL")
        _ = try await store.record(receipt("m1"), on: group.next()).get()
        XCTAssertEqual(try store.writerSynchronousLevel(), 2)
        await store.close()
    }

    /// Under commits that never pause, passive checkpoints never catch up with the last frame
    /// and the log never starts over: the restarting checkpoint past `walRestartFrames` keeps
    /// the WAL file bounded.
    func testTheWALStaysBoundedUnderCommitsThatNeverPause() async throws {
        var options = SQLiteReceiptStore.Options(maxBatch: 1024, retentionDays: nil, replicate: false)
        options.walRestartFrames = 256
        options.walCheckpointIntervalSeconds = 0.01
        options.maxBatch = 8  // small commits: each writes its pages again, so the log grows fast
        let store = try makeStore(options)
        let walPath = directory.appendingPathComponent("r.sqlite-wal").path
        var largest = 0
        let loop = group.next()
        // Everything submitted at once: the writer commits batch after batch without a gap.
        let futures = (0..<160).map { part in
            store.recordAll((0..<100).map { receipt("m-\(part)-\($0)", user: "u\(part % 16)") }, on: loop)
        }
        for f in futures {
            _ = try await f.get()
            let size = (try? FileManager.default.attributesOfItem(atPath: walPath)[.size] as? Int) ?? 0
            largest = max(largest, size)
        }
        await store.close()
        print("largest WAL: \(largest) bytes")
        XCTAssertLessThan(largest, 12 << 20, "the log starts over instead of growing with every receipt")
    }

    func testPruneDeletesOnlyOldReceipts() async throws {
        let store = try makeStore()
        let loop = group.next()
        _ = try await store.record(receipt("old", ts: 100), on: loop).get()
        _ = try await store.record(receipt("new", ts: 5000), on: loop).get()
        XCTAssertEqual(try store.pruneNow(olderThanMs: 1000), 1)
        let left = try await store.sync(authorID: "alice", since: 0, limit: 10, on: loop).get()
        XCTAssertEqual(left.map(\.messageID), ["new"])
        await store.close()
    }

    func testStoreFailureFailsTheFutureAndNeverAcknowledges() async throws {
        let store = try makeStore()
        let loop = group.next()
        _ = try await store.record(receipt("m1"), on: loop).get()
        // Break the schema behind the store's back: the next commit must fail, not succeed.
        let queue = try DatabaseQueue(path: directory.appendingPathComponent("r.sqlite").path)
        try queue.inDatabase { try $0.execute(sql: "DROP TABLE receipt") }
        do {
            _ = try await store.record(receipt("m2"), on: loop).get()
            XCTFail("a failed commit must not succeed")
        } catch let error as ReceiptStoreError {
            guard case .unavailable = error else { return XCTFail("unexpected \(error)") }
        }
        await store.close()
    }

    func testRecordAfterCloseFails() async throws {
        let store = try makeStore()
        await store.close()
        do {
            _ = try await store.record(receipt("m1"), on: group.next()).get()
            XCTFail("closed store accepted a receipt")
        } catch let error as ReceiptStoreError {
            XCTAssertEqual(error, .closed)
        }
    }

    func testOnlineBackupCopiesReceipts() async throws {
        let store = try makeStore()
        _ = try await store.record(receipt("m1"), on: group.next()).get()
        let backup = directory.appendingPathComponent("backup.sqlite").path
        try store.backup(to: backup)
        await store.close()
        let copy = try DatabaseQueue(path: backup)
        let count: Int? = try copy.inDatabase { try Int.fetchOne($0, sql: "SELECT COUNT(*) FROM receipt") }
        XCTAssertEqual(count, 1)
    }
}
