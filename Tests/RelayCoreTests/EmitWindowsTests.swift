import XCTest

@testable import RelayCore

final class EmitWindowsTests: XCTestCase {
    func testTheFirstEventOpensAWindowAndTheLatestIsSentWhenItCloses() {
        var c = EmitWindows<String, Int>()
        XCTAssertNil(c.nextDeadline)
        XCTAssertEqual(c.offer(1, key: "unread:bob", windowMs: 500, now: 1_000), .opened(deadline: 1_500))
        XCTAssertEqual(c.offer(2, key: "unread:bob", windowMs: 500, now: 1_100), .replaced(deadline: 1_500))
        XCTAssertEqual(c.offer(3, key: "unread:bob", windowMs: 500, now: 1_499), .replaced(deadline: 1_500), "a later event does not extend the window")
        XCTAssertEqual(c.pending("unread:bob"), 3)
        XCTAssertEqual(c.nextDeadline, 1_500)
        XCTAssertTrue(c.flush(now: 1_499).isEmpty, "nothing is sent before the window closes")
        let sent = c.flush(now: 1_500)
        XCTAssertEqual(sent.map { $0.item }, [3], "only the latest")
        XCTAssertEqual(sent.map { $0.count }, [3])
        XCTAssertNil(c.nextDeadline)
        XCTAssertEqual(c.pendingCount, 0)
        XCTAssertTrue(c.flush(now: 5_000).isEmpty, "sent once")
    }

    func testTheNextEventAfterAFlushOpensANewWindow() {
        var c = EmitWindows<String, Int>()
        _ = c.offer(1, key: "k", windowMs: 100, now: 0)
        XCTAssertEqual(c.flush(now: 100).map { $0.item }, [1])
        XCTAssertEqual(c.offer(2, key: "k", windowMs: 100, now: 150), .opened(deadline: 250))
        XCTAssertEqual(c.flush(now: 260).map { $0.item }, [2])
    }

    func testKeysHaveTheirOwnWindowsAndFlushInDeadlineOrder() {
        var c = EmitWindows<String, String>()
        _ = c.offer("a1", key: "a", windowMs: 300, now: 0)
        _ = c.offer("b1", key: "b", windowMs: 100, now: 50)
        _ = c.offer("c1", key: "c", windowMs: 10_000, now: 60)
        _ = c.offer("a2", key: "a", windowMs: 300, now: 70)
        XCTAssertEqual(c.nextDeadline, 150)
        XCTAssertEqual(c.flush(now: 150).map { $0.item }, ["b1"])
        XCTAssertEqual(c.nextDeadline, 300)
        XCTAssertEqual(c.flush(now: 400).map { $0.item }, ["a2"])
        XCTAssertEqual(c.nextDeadline, 10_060)
        XCTAssertEqual(c.flush(now: 20_000).map { $0.key }, ["c"])
    }

    func testALateFlushSendsEveryDueWindowEarliestFirst() {
        var c = EmitWindows<Int, Int>()
        for k in (0..<50).reversed() { _ = c.offer(k, key: k, windowMs: Int64(k) * 10, now: 0) }
        XCTAssertEqual(c.flush(now: 1_000).map { $0.key }, Array(0..<50))
    }

    func testWindowsWithTheSameDeadlineKeepTheirOrder() {
        var c = EmitWindows<String, Int>()
        for (i, k) in ["x", "y", "z", "w"].enumerated() { _ = c.offer(i, key: k, windowMs: 100, now: 0) }
        XCTAssertEqual(c.flush(now: 100).map { $0.key }, ["x", "y", "z", "w"])
    }

    func testBeyondMaxPendingEventsAreNotHeld() {
        var c = EmitWindows<String, Int>(maxPending: 2)
        XCTAssertEqual(c.offer(1, key: "a", windowMs: 100, now: 0), .opened(deadline: 100))
        XCTAssertEqual(c.offer(2, key: "b", windowMs: 100, now: 0), .opened(deadline: 100))
        XCTAssertEqual(c.offer(3, key: "c", windowMs: 100, now: 0), .overflow)
        XCTAssertEqual(c.offer(4, key: "a", windowMs: 100, now: 0), .replaced(deadline: 100), "an open window still coalesces")
        XCTAssertEqual(c.flush(now: 100).map { $0.item }, [4, 2])
        XCTAssertEqual(c.offer(5, key: "c", windowMs: 100, now: 100), .opened(deadline: 200))
    }

    /// 20 events over 500 ms with a 500 ms window: at most two go out, the last is the latest,
    /// and none waited longer than the window.
    func testABurstSendsAtMostOnePerWindowAndTheLatestLast() {
        var c = EmitWindows<String, Int>()
        var sent: [(at: Int64, item: Int)] = []
        var offeredAt: [Int: Int64] = [:]
        var now: Int64 = 0
        for i in 0..<20 {
            now = Int64(i) * 26
            offeredAt[i] = now
            sent += c.flush(now: now).map { (now, $0.item) }
            _ = c.offer(i, key: "k", windowMs: 500, now: now)
        }
        while let d = c.nextDeadline {
            now = d
            sent += c.flush(now: now).map { (now, $0.item) }
        }
        XCTAssertLessThanOrEqual(sent.count, 2)
        XCTAssertEqual(sent.last?.item, 19)
        for s in sent { XCTAssertLessThanOrEqual(s.at - (offeredAt[s.item] ?? 0), 500) }
    }
}

final class LastSeenBookTests: XCTestCase {
    func testRemembersTheLatestDisconnect() {
        var b = LastSeenBook()
        XCTAssertNil(b.lastSeen("bob", now: 0))
        b.record("bob", at: 100)
        b.record("bob", at: 300)
        b.record("bob", at: 200)
        XCTAssertEqual(b.lastSeen("bob", now: 400), 300, "a later time wins")
        XCTAssertEqual(b.count, 1)
    }

    func testForgetsAfterTheRetention() {
        var b = LastSeenBook(retentionMs: 1_000)
        b.record("bob", at: 0)
        XCTAssertEqual(b.lastSeen("bob", now: 1_000), 0)
        XCTAssertNil(b.lastSeen("bob", now: 1_001))
        b.record("carol", at: 5_000)
        XCTAssertEqual(b.count, 1, "expired records are dropped as new ones come")
    }

    func testIsBoundedAndForgetsTheLeastRecentlySeenFirst() {
        var b = LastSeenBook(capacity: 3)
        for (i, u) in ["a", "b", "c", "d"].enumerated() { b.record(u, at: Int64(i)) }
        XCTAssertEqual(b.count, 3)
        XCTAssertNil(b.lastSeen("a", now: 10))
        b.record("b", at: 10)
        b.record("e", at: 11)
        XCTAssertNil(b.lastSeen("c", now: 12), "c was seen before b's newer record")
        XCTAssertEqual(b.lastSeen("b", now: 12), 10)
        for i in 0..<100 { b.record("b", at: 20 + Int64(i)) }
        XCTAssertLessThanOrEqual(b.count, 3)
        XCTAssertEqual(b.lastSeen("b", now: 200), 119)
    }
}
