import Foundation
import Logging
import NIOCore
import NIOPosix
import RelayCore
import RelayRedis
import RelayStore
import RelayTestSupport
import XCTest

@testable import RelayCluster

/// Receipt replication when Redis loses data: the pure pieces (stream ids, the round's reply,
/// the recovery plan, the watermark), the round script against a real redis-server, and two
/// replicators recovering from Redis restarting empty and from Redis losing its last writes.
final class ReceiptReplicatorTests: XCTestCase {
    // MARK: Pure pieces

    func testStreamIDsParseCompareAndMapToCursorsInOrder() {
        XCTAssertEqual(ReceiptStreamID("1700000000000-3"), ReceiptStreamID(ms: 1_700_000_000_000, seq: 3))
        for bad in ["", "0", "1-", "-1", "1-2-3", "a-1", "1--2", "+", "-"] { XCTAssertNil(ReceiptStreamID(bad), bad) }
        XCTAssertLessThan(ReceiptStreamID(ms: 5, seq: 9), ReceiptStreamID(ms: 6, seq: 0))
        XCTAssertLessThan(ReceiptStreamID(ms: 6, seq: 0), ReceiptStreamID(ms: 6, seq: 1))
        XCTAssertLessThan(ReceiptStreamID(ms: 5, seq: 9).gid, ReceiptStreamID(ms: 6, seq: 0).gid)
        XCTAssertEqual(ReceiptStreamID(ms: 1, seq: 2).gid, 65_538)
        XCTAssertEqual(ReceiptReplicator.gid("1-2"), 65_538)
        XCTAssertEqual(ReceiptStreamID(ms: 12, seq: 0).description, "12-0")
    }

    func testReplicationKeysShareOneHashSlot() {
        let slot = RedisHashSlot.slot(of: ReceiptScripts.stream)
        XCTAssertEqual(ReceiptScripts.stream, "relay:receipts", "the stream keeps its name: nodes of the previous version still read and write it")
        for key in ReceiptScripts.keys { XCTAssertEqual(RedisHashSlot.slot(of: key), slot, key) }
    }

    func testRoundReplyParsing() {
        func s(_ text: String) -> RESPValue { .bulkString(ByteBuffer(string: text)) }
        XCTAssertEqual(ReceiptRoundReply(.array([s("ok"), s("e1"), .integer(3), s("5-0"), s("5-1")])), .ok(epoch: "e1", seq: 3, ids: ["5-0", "5-1"]))
        XCTAssertEqual(ReceiptRoundReply(.array([s("ok"), s("e1"), .integer(0)])), .ok(epoch: "e1", seq: 0, ids: []))
        XCTAssertEqual(
            ReceiptRoundReply(.array([s("lost"), s("e2"), s("4-0"), .integer(1), s(""), s("0-0")])),
            .lost(.init(declared: true, epoch: "e2", from: "4-0", seq: 1, published: "", top: "0-0")))
        XCTAssertEqual(
            ReceiptRoundReply(.array([s("changed"), s("e2"), s(""), .integer(9), s("3-0"), s("8-0")])),
            .lost(.init(declared: false, epoch: "e2", from: "", seq: 9, published: "3-0", top: "8-0")))
        // Malformed answers are refused, never half-trusted.
        XCTAssertNil(ReceiptRoundReply(.array([s("ok"), s(""), .integer(3)])), "no epoch")
        XCTAssertNil(ReceiptRoundReply(.array([s("ok"), s("e1"), s("x")])))
        XCTAssertNil(ReceiptRoundReply(.array([s("ok"), s("e1"), .integer(1), .integer(7)])), "an id that is not a string")
        XCTAssertNil(ReceiptRoundReply(.array([s("lost"), s("e2"), s("4-0"), .integer(1)])))
        XCTAssertNil(ReceiptRoundReply(.array([s("what"), s("e2"), .integer(1)])))
        XCTAssertNil(ReceiptRoundReply(.null))
    }

    func testRecoveryFloorAndRewind() {
        let state = ReplicationLedger.State(streamID: "90-0", epoch: "e1", seq: 40, published: "80-0", watermark: "70-0")
        XCTAssertEqual(ReceiptRecovery.floor(state), ReceiptStreamID(ms: 70, seq: 0), "the watermark")
        XCTAssertEqual(ReceiptRecovery.floor(state, declaredFrom: "60-0"), ReceiptStreamID(ms: 60, seq: 0), "a lower declared floor counts")
        XCTAssertEqual(ReceiptRecovery.floor(state, declaredFrom: "75-0"), ReceiptStreamID(ms: 70, seq: 0))
        XCTAssertEqual(ReceiptRecovery.floor(state, declaredFrom: "garbage"), ReceiptStreamID(ms: 70, seq: 0))
        var behind = state
        behind.streamID = "50-0"
        XCTAssertEqual(ReceiptRecovery.floor(behind), ReceiptStreamID(ms: 50, seq: 0), "a node never floors above what it has read")
        var unreadable = state
        unreadable.watermark = "nonsense"
        XCTAssertEqual(ReceiptRecovery.floor(unreadable), .zero, "an unreadable watermark sends everything again")

        // Redis came back from an older copy ending at 65-0: read again from the floor.
        let prefix = ReceiptRecovery.recovered(state, after: .init(declared: true, epoch: "e2", from: "70-0", seq: 30, published: "60-0", top: "85-0"))
        XCTAssertEqual(prefix.floor, ReceiptStreamID(ms: 70, seq: 0))
        XCTAssertEqual(prefix.state, .init(streamID: "70-0", epoch: "e2", seq: 30, published: "60-0", watermark: "70-0"))
        // Redis came back empty: read the new stream from its start.
        let empty = ReceiptRecovery.recovered(state, after: .init(declared: false, epoch: "e3", from: "", seq: 0, published: "", top: "0-0"))
        XCTAssertEqual(empty.floor, ReceiptStreamID(ms: 70, seq: 0))
        XCTAssertEqual(empty.state, .init(streamID: "0-0", epoch: "e3", seq: 0, published: "", watermark: "70-0"))
    }

    func testWatermarkIsTheLowestLivePositionOnceOldEnough() {
        XCTAssertEqual(ReceiptWatermark.measure(members: ["a", "b"], positions: ["a": "9-0", "b": "7-3", "gone": "1-0"]), ReceiptStreamID(ms: 7, seq: 3), "dead nodes' positions do not count")
        XCTAssertNil(ReceiptWatermark.measure(members: ["a", "b"], positions: ["a": "9-0"]), "a live node that has not published: unknown")
        XCTAssertNil(ReceiptWatermark.measure(members: ["a"], positions: ["a": "junk"]))
        XCTAssertNil(ReceiptWatermark.measure(members: [], positions: ["a": "9-0"]))

        var w = ReceiptWatermark(delayMs: 1_000)
        w.offer(ReceiptStreamID(ms: 1, seq: 0), at: 0)
        w.offer(ReceiptStreamID(ms: 2, seq: 0), at: 500)
        w.offer(ReceiptStreamID(ms: 3, seq: 0), at: 900)
        XCTAssertNil(w.settled(at: 999))
        XCTAssertEqual(w.settled(at: 1_600), ReceiptStreamID(ms: 2, seq: 0), "the newest measurement that is old enough")
        XCTAssertNil(w.settled(at: 1_600), "used once")
        XCTAssertEqual(w.settled(at: 1_900), ReceiptStreamID(ms: 3, seq: 0))
        w.offer(ReceiptStreamID(ms: 4, seq: 0), at: 2_000)
        w.reset()
        XCTAssertNil(w.settled(at: 10_000), "measurements from before a loss are never used")
    }

    // MARK: Against a real redis-server

    var group: MultiThreadedEventLoopGroup!
    var directory: URL!

    override func setUp() {
        group = MultiThreadedEventLoopGroup(numberOfThreads: 2)
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("relay-replicator-\(UUID().uuidString)")
        try? FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    }

    override func tearDown() {
        try? group.syncShutdownGracefully()
        try? FileManager.default.removeItem(at: directory)
    }

    func client(_ redis: RedisServerProcess) async throws -> RedisClient {
        var options = RedisClient.Options()
        options.initialBackoff = .milliseconds(20)
        options.maxBackoff = .milliseconds(200)
        let client = RedisClient(endpoint: RedisEndpoint(url: "redis://127.0.0.1:\(redis.port)")!, eventLoop: group.next(), options: options)
        client.start(onMessage: { _, _ in }, onLinkChange: { _ in })
        for _ in 0..<500 where !client.isUp { try await Task.sleep(nanoseconds: 10_000_000) }
        XCTAssertTrue(client.isUp, "redis link up within 5 s")
        return client
    }

    /// One round script call, as a node would make it.
    func round(
        _ c: RedisClient, node: String, epoch: String = "", seq: Int64 = 0, published: String = "", position: String = "0-0", floor: String = "0-0",
        token: String = "t-\(UUID().uuidString)", entries: [String] = []
    ) async throws -> ReceiptRoundReply? {
        var args = ["EVAL", ReceiptScripts.round, String(ReceiptScripts.keys.count)] + ReceiptScripts.keys
        args += [node, epoch, String(seq), published, position, floor, token, "1000"]
        for e in entries { args += [node, e] }
        return ReceiptRoundReply(try await c.send(args).get())
    }

    func testRoundScriptFindsEveryKindOfLoss() async throws {
        let redis = try startedRedisServer()
        let c = try await client(redis)
        defer { Task { [c] in await c.stop() } }

        // A fresh node on a fresh Redis creates the epoch and appends.
        guard case .ok(let e1, 2, let ids)? = try await round(c, node: "a", token: "e1", entries: ["x", "y"]) else { return XCTFail("first round") }
        XCTAssertEqual(e1, "e1")
        XCTAssertEqual(ids.count, 2)
        let top = ids[1]
        // The next round with what Redis confirmed: fine, and it publishes the position.
        guard case .ok("e1", 3, let more)? = try await round(c, node: "a", epoch: "e1", seq: 2, position: top, entries: ["z"]), let last = more.first else {
            return XCTFail("second round")
        }
        let v4 = try await c.send(["HGET", ReceiptScripts.pos, "a"]).get().string
        XCTAssertEqual(v4, top)
        // A fresh node adopts the epoch: nothing was lost for it.
        guard case .ok("e1", 0, [])? = try await round(c, node: "b") else { return XCTFail("fresh node") }

        // The counter went back (a replica without the last writes): lost, declared with the floor.
        guard case .lost(let loss)? = try await round(c, node: "a", epoch: "e1", seq: 5, published: top, position: top, floor: "1-0", token: "e2") else {
            return XCTFail("counter rolled back")
        }
        XCTAssertEqual(loss, .init(declared: true, epoch: "e2", from: "1-0", seq: 3, published: top, top: last))
        let v5 = try await c.send(["XLEN", ReceiptScripts.stream]).get().int
        XCTAssertEqual(v5, 3, "nothing appended on a loss")
        // Another node learns of it from the epoch.
        guard case .lost(let seen)? = try await round(c, node: "b", epoch: "e1", position: top, floor: "2-0") else { return XCTFail("changed epoch") }
        XCTAssertEqual(seen.declared, false)
        XCTAssertEqual(seen.epoch, "e2")
        XCTAssertEqual(seen.from, "1-0")
        // A node that had read less than the declared floor was not counted in it: it declares again.
        guard case .lost(let again)? = try await round(c, node: "b", epoch: "e1", position: "0-5", floor: "0-5", token: "e3") else { return XCTFail("behind the floor") }
        XCTAssertEqual(again.declared, true)
        let v6 = try await c.send(["GET", ReceiptScripts.from]).get().string
        XCTAssertEqual(v6, "0-5")

        // The published position went back.
        _ = try await c.send(["HSET", ReceiptScripts.pos, "a", "1-0"]).get()
        guard case .lost? = try await round(c, node: "a", epoch: "e3", seq: 3, published: top, position: top) else { return XCTFail("position rolled back") }
        // The stream ends below what the node has read.
        guard case .lost? = try await round(c, node: "b", epoch: try await c.send(["GET", ReceiptScripts.epoch]).get().string ?? "", position: "99999999999999-0") else {
            return XCTFail("stream shorter than read")
        }
        // Redis restarted empty: the epoch is gone.
        _ = try await c.send(["FLUSHALL"]).get()
        guard case .lost(let empty)? = try await round(c, node: "a", epoch: "e3", seq: 3, published: top, position: top, floor: "1-0", token: "e9") else {
            return XCTFail("empty")
        }
        XCTAssertEqual(empty, .init(declared: true, epoch: "e9", from: "1-0", seq: 0, published: "", top: "0-0"))
        redis.kill()
    }

    // MARK: Two nodes

    final class Node {
        let name: String
        let store: SQLiteReceiptStore
        let replicator: ReceiptReplicator
        let redis: RedisClient

        init(_ name: String, directory: URL, redis: RedisClient) throws {
            let options = SQLiteReceiptStore.Options(maxBatch: 1024, retentionDays: nil, replicate: true)
            self.name = name
            self.redis = redis
            store = try SQLiteReceiptStore(path: directory.appendingPathComponent("\(name).sqlite").path, options: options)
            replicator = ReceiptReplicator(store: store, redis: redis, nodeID: name, watermarkDelayMs: 0, logger: Logger(label: "test"))
        }

        func record(_ messages: [String]) async throws {
            _ = try await store.recordAll(messages.map { NewReceipt(room: "conversation:1", messageID: $0, authorID: "alice", userID: "bob", kind: .read, ts: 1) }, on: redis.eventLoop).get()
        }

        /// receipt:sync from 0: message → cluster cursor.
        func synced() async throws -> [String: Int64] {
            var out: [String: Int64] = [:]
            for r in try await store.sync(authorID: "alice", since: 0, limit: 10_000, on: redis.eventLoop).get() { out[r.messageID] = r.id }
            return out
        }
    }

    func rounds(_ nodes: [Node], _ n: Int = 3) async throws {
        for _ in 0..<n { for node in nodes { try await node.replicator.roundNow().get() } }
    }

    func testTwoNodesRecoverFromRedisRestartingEmptyAndFromLosingItsLastWrites() async throws {
        let redis = try startedRedisServer()
        let ca = try await client(redis)
        let cb = try await client(redis)
        let a = try Node("node-a", directory: directory, redis: ca)
        let b = try Node("node-b", directory: directory, redis: cb)
        let both = [a, b]
        func live() async throws { _ = try await ca.send(["ZADD", ClusterKeys.nodes, "1", "node-a", "1", "node-b"]).get() }
        try await live()

        let early = (0..<20).map { "early-\($0)" }
        try await a.record(early)
        try await rounds(both, 4)
        let v7 = Set(try await b.synced().keys)
        XCTAssertEqual(v7, Set(early), "replicated normally")
        // Enough rounds for a watermark (delay 0 in this test) above the early receipts.
        try await rounds(both, ReceiptReplicator.watermarkEvery + 1)
        let cursors = try await a.synced()

        // Redis accepts receipts node-b has not read, then restarts empty.
        let late = (0..<15).map { "late-\($0)" }
        try await a.record(late)
        try await a.replicator.roundNow().get()
        let v8 = try await ca.send(["XLEN", ReceiptScripts.stream]).get().int
        XCTAssertEqual(v8, 35)
        _ = try await ca.send(["FLUSHALL"]).get()
        try await live()
        try await rounds(both, 6)
        let all = Set(early + late)
        let v9 = Set(try await b.synced().keys)
        XCTAssertEqual(v9, all, "node-b has what Redis lost before it read it")
        let v10 = Set(try await a.synced().keys)
        XCTAssertEqual(v10, all)
        let afterEmpty = try await a.synced()
        for m in early { XCTAssertEqual(afterEmpty[m], cursors[m], "\(m): below the watermark, sent again by nobody, cursor kept") }
        let v11: Int64 = try await ca.send(["XLEN", ReceiptScripts.stream]).get().int ?? 99
        XCTAssertLessThanOrEqual(v11, Int64(2 * late.count), "only what is above the watermark goes again")

        // Redis loses its last writes (a replica that had not got them takes over): node-a had
        // read its own entries, node-b had not; node-a's counter goes back.
        try await rounds(both, ReceiptReplicator.watermarkEvery + 1)
        let kept = try await ca.send(["XREVRANGE", ReceiptScripts.stream, "+", "-", "COUNT", "1"]).get().elements?.first?.elements?.first?.string ?? ""
        let seqBefore = try await ca.send(["HGET", ReceiptScripts.seq, "node-a"]).get()
        let posBefore = try await ca.send(["HGETALL", ReceiptScripts.pos]).get()
        let newer = (0..<10).map { "newer-\($0)" }
        try await a.record(newer)
        try await a.replicator.roundNow().get()  // pushed
        try await a.replicator.roundNow().get()  // node-a reads its own entries back; node-b has not
        // The copy Redis comes back with ends at `kept`: the later entries and writes are gone.
        let lost = (try await ca.send(["XRANGE", ReceiptScripts.stream, "(" + kept, "+"]).get().elements ?? []).compactMap { $0.elements?.first?.string }
        XCTAssertEqual(lost.count, newer.count)
        _ = try await ca.send(["XDEL", ReceiptScripts.stream] + lost).get()
        _ = try await ca.send(["HSET", ReceiptScripts.seq, "node-a", seqBefore.string ?? "0"]).get()
        for (k, v) in ReceiptReplicator.pairs(posBefore) { _ = try await ca.send(["HSET", ReceiptScripts.pos, k, v]).get() }
        try await rounds(both, 6)
        let everything = all.union(newer)
        let v12 = Set(try await b.synced().keys)
        XCTAssertEqual(v12, everything, "node-b has the receipts the failover lost")
        let v13 = Set(try await a.synced().keys)
        XCTAssertEqual(v13, everything)

        await ca.stop()
        await cb.stop()
        await a.store.close()
        await b.store.close()
        redis.kill()
    }
}
