import Foundation
import GRDB
import NIOCore
import NIOPosix
import RelayCore
import XCTest

@testable import RelayStore

/// The store's side of cluster replication: pending receipts with their origin, the
/// replication state in `cluster_state`, and "send again after a Redis data loss".
final class ReceiptReplicationStoreTests: XCTestCase {
    var group: MultiThreadedEventLoopGroup!
    var directory: URL!

    override func setUp() {
        group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("relay-repl-\(UUID().uuidString)")
        try? FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    }

    override func tearDown() {
        try? group.syncShutdownGracefully()
        try? FileManager.default.removeItem(at: directory)
    }

    var path: String { directory.appendingPathComponent("r.sqlite").path }

    func makeStore() throws -> SQLiteReceiptStore {
        let options = SQLiteReceiptStore.Options(maxBatch: 1024, retentionDays: nil, replicate: true)
        return try SQLiteReceiptStore(path: path, options: options)
    }

    func receipt(_ message: String, user: String = "bob") -> NewReceipt {
        NewReceipt(room: "conversation:1", messageID: message, authorID: "alice", userID: user, kind: .delivered, ts: 1000)
    }

    /// (message, gid, replicated, origin) of every row, by message.
    func rows() throws -> [String: (gid: Int64?, replicated: Int, origin: String?)] {
        let db = try DatabaseQueue(path: path)
        return try db.read { db in
            var out: [String: (Int64?, Int, String?)] = [:]
            for row in try Row.fetchAll(db, sql: "SELECT message_id, gid, replicated, origin FROM receipt") {
                out[row["message_id"]] = (row["gid"], row["replicated"], row["origin"])
            }
            return out
        }
    }

    func testReplicationStateDefaultsAndRoundTrips() async throws {
        let store = try makeStore()
        let loop = group.next()
        let v1 = try await store.replication.replicationState(on: loop).get()
        XCTAssertEqual(v1, .init(), "a new database knows no epoch, counter or position")
        let own = try await store.record(receipt("m1"), on: loop).get()
        try await store.replication.markReplicated([own.receipt.id], epoch: "e1", seq: 7, published: "5-0", on: loop).get()
        try await store.replication.saveWatermark("4-1", on: loop).get()
        _ = try await store.replication.applyReplicated([(gid: 6 * 65_536, origin: "node-b", receipt: receipt("m2"))], lastStreamID: "6-0", on: loop).get()
        await store.close()

        let reopened = try makeStore()
        let state = try await reopened.replication.replicationState(on: group.next()).get()
        XCTAssertEqual(state, .init(streamID: "6-0", epoch: "e1", seq: 7, published: "5-0", watermark: "4-1"), "a restarted node remembers what Redis confirmed")
        await reopened.close()
    }

    func testPendingReplicasCarryTheirOrigin() async throws {
        let store = try makeStore()
        let loop = group.next()
        let own = try await store.record(receipt("m1"), on: loop).get()
        _ = try await store.replication.applyReplicated([(gid: 10 * 65_536, origin: "node-b", receipt: receipt("m2"))], lastStreamID: "10-0", on: loop).get()
        var pending = try await store.replication.pendingReplicas(limit: 10, on: loop).get()
        XCTAssertEqual(pending.map(\.receipt.messageID), ["m1"], "only this node's new receipt waits; replicas from the stream do not")
        XCTAssertNil(pending.first?.origin)
        XCTAssertEqual(pending.first?.receipt.id, own.receipt.id)

        _ = try await store.replication.replayAfterLoss(above: 0, state: .init(), on: loop).get()
        pending = try await store.replication.pendingReplicas(limit: 10, on: loop).get()
        XCTAssertEqual(pending.map(\.receipt.messageID), ["m1", "m2"])
        XCTAssertEqual(pending.map(\.origin), [nil, "node-b"], "a replica is sent again under the node that acked it")
        await store.close()
    }

    func testReplayAfterLossQueuesEverythingAboveTheFloorAndForgetsItsCursor() async throws {
        let store = try makeStore()
        let loop = group.next()
        // m1: this node's, read back at gid 100 (at or below the floor: every node has it).
        // m2: this node's, read back at gid 300 (above the floor).
        // m3: this node's, pushed but not read back yet (no gid).
        // m4: this node's, not pushed yet.
        // m5: node-b's at gid 50; m6: node-b's at gid 400.
        let m1 = try await store.record(receipt("m1"), on: loop).get()
        let m2 = try await store.record(receipt("m2"), on: loop).get()
        let m3 = try await store.record(receipt("m3"), on: loop).get()
        _ = try await store.record(receipt("m4"), on: loop).get()
        try await store.replication.markReplicated([m1.receipt.id, m2.receipt.id, m3.receipt.id], epoch: "e1", seq: 3, published: "", on: loop).get()
        _ = try await store.replication.applyReplicated(
            [
                (gid: 50, origin: "node-b", receipt: receipt("m5")), (gid: 100, origin: "node-a", receipt: receipt("m1")),
                (gid: 300, origin: "node-a", receipt: receipt("m2")), (gid: 400, origin: "node-b", receipt: receipt("m6")),
            ], lastStreamID: "0-400", on: loop
        ).get()
        let before = try rows()
        XCTAssertEqual(before["m1"]?.gid, 100)
        XCTAssertNil(before["m3"]?.gid)

        let next = ReplicationLedger.State(streamID: "0-200", epoch: "e2", seq: 1, published: "0-90", watermark: "0-200")
        let requeued = try await store.replication.replayAfterLoss(above: 200, state: next, on: loop).get()
        XCTAssertEqual(requeued, 4, "m2, m3, m4 and m6")
        let after = try rows()
        XCTAssertEqual(after["m1"]?.gid, 100)
        XCTAssertEqual(after["m1"]?.replicated, 1, "at or below the floor: every live node has it")
        XCTAssertEqual(after["m5"]?.gid, 50)
        XCTAssertEqual(after["m5"]?.replicated, 1)
        for m in ["m2", "m3", "m4", "m6"] {
            XCTAssertNil(after[m]?.gid, "\(m): its cursor is given again by the stream")
            XCTAssertEqual(after[m]?.replicated, 0, "\(m): sent again")
        }
        XCTAssertEqual(after["m6"]?.origin, "node-b")
        let v2 = try await store.replication.replicationState(on: loop).get()
        XCTAssertEqual(v2, next, "the new epoch and position commit with the queue")

        // Sync by cluster cursor hides them until the stream hands out new cursors, then
        // returns them above every cursor given before: a reader may see one twice, never misses one.
        let v3 = try await store.sync(authorID: "alice", since: 0, limit: 10, on: loop).get().map(\.messageID)
        XCTAssertEqual(v3, ["m5", "m1"])
        _ = try await store.replication.applyReplicated(
            [(gid: 900, origin: "node-a", receipt: receipt("m2")), (gid: 901, origin: "node-b", receipt: receipt("m6")), (gid: 902, origin: "node-b", receipt: receipt("m6"))],
            lastStreamID: "0-902", on: loop
        ).get()
        let synced = try await store.sync(authorID: "alice", since: 100, limit: 10, on: loop).get()
        XCTAssertEqual(synced.map(\.messageID), ["m2", "m6"])
        XCTAssertEqual(synced.map(\.id), [900, 901], "the first entry read sets the cursor; a duplicate changes nothing")
        await store.close()
    }
}
