import XCTest

@testable import RelayCore

final class OutboundQueueTests: XCTestCase {
    typealias Key = CoalescingKey

    func testFIFOWithinLimits() {
        var q = OutboundQueue<String>(softLimitBytes: 100, hardLimitBytes: 200, maxCount: 10)
        XCTAssertEqual(q.enqueue("a", bytes: 10), .queued)
        XCTAssertEqual(q.enqueue("b", bytes: 10), .queued)
        XCTAssertEqual(q.queuedBytes, 20)
        XCTAssertEqual(q.dequeue(), "a")
        XCTAssertEqual(q.dequeue(), "b")
        XCTAssertNil(q.dequeue())
        XCTAssertTrue(q.isEmpty)
        XCTAssertEqual(q.queuedBytes, 0)
    }

    func testUnderSoftLimitNothingIsCoalesced() {
        var q = OutboundQueue<String>(softLimitBytes: 100, hardLimitBytes: 200, maxCount: 10)
        let k = Key(event: "location:update", room: "r", user: "u")
        XCTAssertEqual(q.enqueue("loc1", bytes: 10, key: k), .queued)
        XCTAssertEqual(q.enqueue("loc2", bytes: 10, key: k), .queued)
        XCTAssertEqual(q.count, 2)
    }

    func testOverSoftLimitLatestWinsInPlace() {
        var q = OutboundQueue<String>(softLimitBytes: 25, hardLimitBytes: 200, maxCount: 10)
        let k = Key(event: "location:update", room: "r", user: "alice")
        XCTAssertEqual(q.enqueue("first", bytes: 10), .queued)
        XCTAssertEqual(q.enqueue("loc1", bytes: 10, key: k), .queued)
        XCTAssertEqual(q.enqueue("other", bytes: 10), .queued)
        // Over the soft limit now: the newer location replaces the queued one, keeping its place.
        XCTAssertEqual(q.enqueue("loc2", bytes: 12, key: k), .replaced)
        XCTAssertEqual(q.enqueue("loc3", bytes: 9, key: k), .replaced)
        XCTAssertEqual(q.count, 3)
        XCTAssertEqual(q.queuedBytes, 29)
        XCTAssertEqual([q.dequeue(), q.dequeue(), q.dequeue()], ["first", "loc3", "other"])
    }

    func testDifferentSendersAreNotCoalescedTogether() {
        var q = OutboundQueue<String>(softLimitBytes: 0, hardLimitBytes: 200, maxCount: 10)
        XCTAssertEqual(q.enqueue("a1", bytes: 10, key: Key(event: "location:update", room: "r", user: "a")), .queued)
        XCTAssertEqual(q.enqueue("b1", bytes: 10, key: Key(event: "location:update", room: "r", user: "b")), .queued)
        XCTAssertEqual(q.enqueue("a2", bytes: 10, key: Key(event: "location:update", room: "r", user: "a")), .replaced)
        XCTAssertEqual([q.dequeue(), q.dequeue(), q.dequeue()], ["a2", "b1", nil])
    }

    func testDequeuedKeyIsNotReplacedAfterwards() {
        var q = OutboundQueue<String>(softLimitBytes: 0, hardLimitBytes: 200, maxCount: 10)
        let k = Key(event: "typing", room: "r", user: "a")
        XCTAssertEqual(q.enqueue("t1", bytes: 5, key: k), .queued)
        XCTAssertEqual(q.dequeue(), "t1")
        XCTAssertEqual(q.enqueue("t2", bytes: 5, key: k), .queued)
        XCTAssertEqual(q.dequeue(), "t2")
    }

    func testHardLimitAndCountLimitOverflow() {
        var q = OutboundQueue<String>(softLimitBytes: 50, hardLimitBytes: 100, maxCount: 3)
        XCTAssertEqual(q.enqueue("a", bytes: 60), .queued)
        XCTAssertEqual(q.enqueue("b", bytes: 41), .overflow, "over the hard byte limit")
        XCTAssertEqual(q.enqueue("c", bytes: 10), .queued)
        XCTAssertEqual(q.enqueue("d", bytes: 10), .queued)
        XCTAssertEqual(q.enqueue("e", bytes: 1), .overflow, "over the count limit")
        XCTAssertEqual(q.count, 3)
    }

    func testReplacementThatWouldPassHardLimitOverflows() {
        var q = OutboundQueue<String>(softLimitBytes: 10, hardLimitBytes: 100, maxCount: 10)
        let k = Key(event: "location:update", room: "r", user: "a")
        XCTAssertEqual(q.enqueue("big", bytes: 80, key: k), .queued)
        XCTAssertEqual(q.enqueue("small", bytes: 15), .queued)
        XCTAssertEqual(q.enqueue("huge", bytes: 90, key: k), .overflow)
    }

    func testPositionsSurviveCompaction() {
        var q = OutboundQueue<Int>(softLimitBytes: 0, hardLimitBytes: 1_000_000, maxCount: 10_000)
        let k = CoalescingKey(event: "e", room: "r", user: "u")
        for i in 0..<200 { XCTAssertEqual(q.enqueue(i, bytes: 1), .queued) }
        for _ in 0..<150 { _ = q.dequeue() }
        XCTAssertEqual(q.enqueue(1000, bytes: 1, key: k), .queued)
        for _ in 0..<30 { _ = q.dequeue() }  // compaction happens somewhere in here
        XCTAssertEqual(q.enqueue(2000, bytes: 1, key: k), .replaced)
        var rest: [Int] = []
        while let v = q.dequeue() { rest.append(v) }
        XCTAssertEqual(rest, Array(180..<200) + [2000])
    }

    func testRemoveAllEmpties() {
        var q = OutboundQueue<String>(softLimitBytes: 0, hardLimitBytes: 100, maxCount: 10)
        _ = q.enqueue("a", bytes: 10, key: Key(event: "e", room: "r", user: "u"))
        q.removeAll()
        XCTAssertTrue(q.isEmpty)
        XCTAssertEqual(q.queuedBytes, 0)
        XCTAssertEqual(q.enqueue("b", bytes: 10, key: Key(event: "e", room: "r", user: "u")), .queued)
    }
}
