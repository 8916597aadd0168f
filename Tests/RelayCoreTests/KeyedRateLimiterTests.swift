import XCTest
@testable import RelayCore

final class KeyedRateLimiterTests: XCTestCase {
    private let budget = EventRateLimiter.Budget(perSecond: 1, burst: 3)

    func testDefaults() {
        let l = KeyedRateLimiter(budget: budget)
        XCTAssertEqual(l.maxKeys, 100_000)
        XCTAssertEqual(l.budget, budget)
        XCTAssertEqual(l.keyCount, 0)
    }

    func testUnknownKeyIsAllowedWithoutCreatingState() {
        var l = KeyedRateLimiter(budget: budget)
        XCTAssertTrue(l.isAllowed("1.2.3.4", now: 0))
        XCTAssertEqual(l.keyCount, 0)
    }

    func testBurstThenRefillPerKey() {
        var l = KeyedRateLimiter(budget: budget)
        XCTAssertTrue(l.record("ip", now: 0))
        XCTAssertTrue(l.record("ip", now: 0))
        XCTAssertTrue(l.isAllowed("ip", now: 0))
        XCTAssertTrue(l.record("ip", now: 0))
        XCTAssertFalse(l.isAllowed("ip", now: 0))
        XCTAssertFalse(l.record("ip", now: 0))
        XCTAssertFalse(l.isAllowed("ip", now: 999))
        XCTAssertTrue(l.isAllowed("ip", now: 1_000))
        XCTAssertTrue(l.record("ip", now: 1_000))
        XCTAssertFalse(l.record("ip", now: 1_000))
        XCTAssertEqual(l.keyCount, 1)
    }

    func testIsAllowedDoesNotConsume() {
        var l = KeyedRateLimiter(budget: EventRateLimiter.Budget(perSecond: 0, burst: 1))
        l.record("k", now: 0)
        for _ in 0..<5 { XCTAssertFalse(l.isAllowed("k", now: 0)) }
        var m = KeyedRateLimiter(budget: EventRateLimiter.Budget(perSecond: 0, burst: 2))
        m.record("k", now: 0)
        for _ in 0..<5 { XCTAssertTrue(m.isAllowed("k", now: 0)) }
        XCTAssertTrue(m.record("k", now: 0))
        XCTAssertFalse(m.isAllowed("k", now: 0))
    }

    func testKeysAreIndependent() {
        var l = KeyedRateLimiter(budget: EventRateLimiter.Budget(perSecond: 0, burst: 1))
        XCTAssertTrue(l.record("a", now: 0))
        XCTAssertFalse(l.record("a", now: 0))
        XCTAssertTrue(l.record("b", now: 0))
        XCTAssertFalse(l.isAllowed("a", now: 0))
        XCTAssertTrue(l.isAllowed("c", now: 0))
        XCTAssertEqual(l.keyCount, 2)
    }

    func testPruneDropsOnlyFullyRefilledKeys() {
        var l = KeyedRateLimiter(budget: EventRateLimiter.Budget(perSecond: 1, burst: 2))
        l.record("old", now: 0)       // 1 token left, full again at 1_000
        l.record("recent", now: 900)  // full again at 1_900
        l.prune(now: 999)
        XCTAssertEqual(l.keyCount, 2)
        l.prune(now: 1_000)
        XCTAssertEqual(l.keyCount, 1)
        XCTAssertTrue(l.isAllowed("recent", now: 1_000), "recent still has a token, but is not full")
        l.prune(now: 1_900)
        XCTAssertEqual(l.keyCount, 0)
    }

    func testKeyCountIsBounded() {
        var l = KeyedRateLimiter(budget: EventRateLimiter.Budget(perSecond: 0.001, burst: 5), maxKeys: 10)
        for i in 0..<1_000 {
            XCTAssertTrue(l.record("k\(i)", now: Int64(i)), "a new key starts with a full bucket")
            XCTAssertLessThanOrEqual(l.keyCount, 10)
        }
        XCTAssertGreaterThan(l.keyCount, 0)
    }

    func testFullTableIsPrunedBeforeBeingCleared() {
        var l = KeyedRateLimiter(budget: EventRateLimiter.Budget(perSecond: 1, burst: 1), maxKeys: 3)
        l.record("a", now: 0)
        l.record("b", now: 0)
        l.record("hot", now: 1_500)  // a and b have refilled by 1_500; hot has not
        XCTAssertEqual(l.keyCount, 3)
        XCTAssertTrue(l.record("new", now: 1_500))
        // Pruning made room: the refilled keys went, the spent one stayed.
        XCTAssertEqual(l.keyCount, 2)
        XCTAssertFalse(l.isAllowed("hot", now: 1_500))
        XCTAssertFalse(l.isAllowed("new", now: 1_500))
    }

    func testFullTableOfSpentKeysIsCleared() {
        var l = KeyedRateLimiter(budget: EventRateLimiter.Budget(perSecond: 0, burst: 1), maxKeys: 3)
        for k in ["a", "b", "c"] { l.record(k, now: 0) }
        XCTAssertFalse(l.isAllowed("a", now: 0))
        XCTAssertTrue(l.record("d", now: 0))
        XCTAssertEqual(l.keyCount, 1, "nothing could be pruned, so the table was cleared")
        XCTAssertTrue(l.isAllowed("a", now: 0), "cleared keys start over")
    }

    func testExistingKeyIsNeverEvictedByItsOwnRecord() {
        var l = KeyedRateLimiter(budget: EventRateLimiter.Budget(perSecond: 0, burst: 2), maxKeys: 2)
        l.record("a", now: 0)
        l.record("b", now: 0)
        XCTAssertTrue(l.record("a", now: 0))
        XCTAssertFalse(l.record("a", now: 0))
        XCTAssertEqual(l.keyCount, 2)
    }
}
