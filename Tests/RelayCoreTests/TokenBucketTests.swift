import XCTest
@testable import RelayCore

final class TokenBucketTests: XCTestCase {
    func testStartsFull() {
        var b = TokenBucket(capacity: 5, ratePerSecond: 1, now: 0)
        XCTAssertEqual(b.capacity, 5)
        XCTAssertEqual(b.ratePerSecond, 1)
        XCTAssertEqual(b.available(now: 0), 5)
    }

    func testBurstThenRefuse() {
        var b = TokenBucket(capacity: 3, ratePerSecond: 1, now: 0)
        XCTAssertTrue(b.tryConsume(now: 0))
        XCTAssertTrue(b.tryConsume(now: 0))
        XCTAssertTrue(b.tryConsume(now: 0))
        XCTAssertFalse(b.tryConsume(now: 0))
        XCTAssertFalse(b.tryConsume(now: 999))
        XCTAssertEqual(b.available(now: 999), 0.999, accuracy: 1e-9)
    }

    func testRefillOverTime() {
        var b = TokenBucket(capacity: 2, ratePerSecond: 10, now: 0)  // one token per 100 ms
        XCTAssertTrue(b.tryConsume(now: 0))
        XCTAssertTrue(b.tryConsume(now: 0))
        XCTAssertFalse(b.tryConsume(now: 99))
        XCTAssertTrue(b.tryConsume(now: 100))
        XCTAssertFalse(b.tryConsume(now: 100))
        XCTAssertTrue(b.tryConsume(now: 200))
        XCTAssertEqual(b.available(now: 250), 0.5, accuracy: 1e-9)
    }

    func testRefillIsCappedAtCapacity() {
        var b = TokenBucket(capacity: 3, ratePerSecond: 100, now: 0)
        XCTAssertTrue(b.tryConsume(3, now: 0))
        XCTAssertEqual(b.available(now: 1_000_000), 3)
        for _ in 0..<3 { XCTAssertTrue(b.tryConsume(now: 1_000_000)) }
        XCTAssertFalse(b.tryConsume(now: 1_000_000))
    }

    func testSteadyRate() {
        // 5 per second with a burst of 5: over 10 s at most 5 + 50 events pass.
        var b = TokenBucket(capacity: 5, ratePerSecond: 5, now: 0)
        var passed = 0
        for t in stride(from: Int64(0), through: 10_000, by: 10) where b.tryConsume(now: t) { passed += 1 }
        XCTAssertEqual(passed, 55)
    }

    func testCost() {
        var b = TokenBucket(capacity: 10, ratePerSecond: 1, now: 0)
        XCTAssertTrue(b.tryConsume(7, now: 0))
        XCTAssertFalse(b.tryConsume(4, now: 0), "not enough: nothing is taken")
        XCTAssertEqual(b.available(now: 0), 3)
        XCTAssertTrue(b.tryConsume(3, now: 0))
        XCTAssertFalse(b.tryConsume(11, now: 1_000_000), "more than capacity never passes")
    }

    func testTimeGoingBackwardsDoesNotRefill() {
        var b = TokenBucket(capacity: 1, ratePerSecond: 1, now: 10_000)
        XCTAssertTrue(b.tryConsume(now: 10_000))
        XCTAssertFalse(b.tryConsume(now: 5_000))
        XCTAssertEqual(b.available(now: 0), 0)
        // Refill is measured from the latest time seen, not from the earlier one.
        XCTAssertFalse(b.tryConsume(now: 10_999))
        XCTAssertTrue(b.tryConsume(now: 11_000))
    }

    func testAvailableDoesNotConsume() {
        var b = TokenBucket(capacity: 2, ratePerSecond: 1, now: 0)
        for _ in 0..<10 { XCTAssertEqual(b.available(now: 0), 2) }
        XCTAssertTrue(b.tryConsume(2, now: 0))
    }

    func testZeroRateNeverRefills() {
        var b = TokenBucket(capacity: 1, ratePerSecond: 0, now: 0)
        XCTAssertTrue(b.tryConsume(now: 0))
        XCTAssertFalse(b.tryConsume(now: Int64(1) << 40))
    }
}
