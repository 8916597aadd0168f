import RelayTestSupport
import XCTest

@testable import RelayCore

/// The per-socket state kept small (#32) behaves as before: deadlines packed in 8 bytes, budgets
/// without their limits, queues and recovery state in copy-on-write boxes, the plain CONNECT
/// answer made again instead of kept.
final class CompactSessionStateTests: XCTestCase {
    private struct Deadlines {
        @PackedDeadline var a: Int64? = nil
        @PackedDeadline var b: Int64? = 5
    }

    func testPackedDeadlinesKeepEveryValueButTheirSentinel() {
        var d = Deadlines()
        XCTAssertNil(d.a)
        XCTAssertEqual(d.b, 5)
        for value: Int64 in [0, -1, 1, .max, .min + 1, 1_795_733_114_373] {
            d.a = value
            XCTAssertEqual(d.a, value)
        }
        d.a = .min
        XCTAssertEqual(d.a, .min + 1, "a deadline saturated down is kept, one above: it has passed either way")
        d.a = nil
        XCTAssertNil(d.a)
        XCTAssertEqual(MemoryLayout<PackedDeadline>.size, 8)
    }

    func testABucketLevelSpendsAndRefillsAsATokenBucket() {
        var bucket = TokenBucket(capacity: 3, ratePerSecond: 2, now: 0)
        var level = BucketLevel(capacity: 3, now: 0)
        let budget = EventRateLimiter.Budget(perSecond: 2, burst: 3)
        for (now, cost) in [(0, 1.0), (0, 1.0), (0, 1.0), (0, 1.0), (499, 1.0), (500, 1.0), (2_000, 2.5), (2_000, 1.0), (10_000, 3.0), (10_000, 0.5)] as [(Int64, Double)] {
            XCTAssertEqual(level.tryConsume(cost, budget, now: now), bucket.tryConsume(cost, now: now), "at \(now) ms, cost \(cost)")
        }
        XCTAssertEqual(MemoryLayout<BucketLevel>.size, 16)
    }

    func testAQueuesCopyIsIndependentAndAnEmptiedQueueWorksAgain() {
        var a = OutboundQueue<Int>(softLimitBytes: 100, hardLimitBytes: 1_000, maxCount: 10)
        XCTAssertTrue(a.isEmpty)
        XCTAssertEqual(a.enqueue(1, bytes: 10), .queued)
        var b = a
        XCTAssertEqual(b.enqueue(2, bytes: 20), .queued)
        XCTAssertEqual(a.count, 1, "the copy's message is not the original's")
        XCTAssertEqual(a.queuedBytes, 10)
        XCTAssertEqual(b.count, 2)
        XCTAssertEqual(b.queuedBytes, 30)
        XCTAssertEqual(a.dequeue(), 1)
        XCTAssertTrue(a.isEmpty)
        XCTAssertEqual(b.dequeue(), 1, "the original's dequeue did not reach the copy")
        XCTAssertEqual(b.dequeue(), 2)
        XCTAssertNil(b.dequeue())
        XCTAssertEqual(b.queuedBytes, 0)
        XCTAssertEqual(b.enqueue(3, bytes: 5), .queued)
        XCTAssertEqual(b.dequeue(), 3)
        XCTAssertLessThanOrEqual(MemoryLayout<OutboundQueue<Int>>.size, 32)
    }

    func testConnectStateCopiesKeepTheirOwnRecoveryLog() {
        var a = ConnectState<Int>()
        a.begin(takesOffsets: true)
        a.assign(pid: "p")
        a.follow(.room("r"), from: StreamOffset(ms: 1, seq: 0))
        var b = a
        XCTAssertTrue(b.record(.room("r"), StreamOffset(ms: 2, seq: 0)))
        XCTAssertTrue(a.record(.room("r"), StreamOffset(ms: 2, seq: 0)), "the copy's record is not the original's")
        XCTAssertFalse(a.record(.room("r"), StreamOffset(ms: 2, seq: 0)))
        XCTAssertEqual(b.pid, "p")
        a.answered(atMs: 7)
        XCTAssertEqual(a.answeredAtMs, 7)
        XCTAssertNil(b.answeredAtMs)
        var plain = ConnectState<Int>()
        plain.answered(atMs: 7)
        XCTAssertNil(plain.answeredAtMs, "only a socket that takes offsets keeps the time (a takeover's)")
        XCTAssertNil(plain.pid)
    }

    func testARepeatedConnectIsAnsweredWithTheSameBytes() {
        let alice = AuthenticatedUser(userID: "alice", rooms: RoomAuthorization(patterns: ["*"]), expiresAt: .max)
        for answer in [ConnectAnswer(user: alice), ConnectAnswer(user: alice, pid: "P"), ConnectAnswer(user: alice, rooms: [("a", "1-0")])] {
            var s = EngineSession(configuration: SessionConfiguration.testing, transport: .websocket, engineSID: "E", socketSID: "S", now: 0)
            _ = s.start(now: 0)
            _ = s.receive(ArraySlice("40{\"token\":\"t\"}".utf8), from: .websocket, now: 1, wallMs: 1)
            let first = s.connectFinished(.success(answer), now: 2).filter { if case .send = $0 { return true } else { return false } }
            XCTAssertEqual(s.receive(ArraySlice("40".utf8), from: .websocket, now: 3, wallMs: 3), first)
        }
    }
}
