import XCTest
@testable import RelayCore

final class EventRateLimiterTests: XCTestCase {
    private typealias Budget = EventRateLimiter.Budget

    func testBudgetInit() {
        let b = Budget(perSecond: 2, burst: 4)
        XCTAssertEqual(b.perSecond, 2)
        XCTAssertEqual(b.burst, 4)
        XCTAssertEqual(b, Budget(perSecond: 2, burst: 4))
    }

    func testPerClassBurstThenRefill() {
        var l = EventRateLimiter(overall: Budget(perSecond: 1_000, burst: 1_000), perClass: [.typing: Budget(perSecond: 2, burst: 3)], now: 0)
        XCTAssertTrue(l.allow(.typing, now: 0))
        XCTAssertTrue(l.allow(.typing, now: 0))
        XCTAssertTrue(l.allow(.typing, now: 0))
        XCTAssertFalse(l.allow(.typing, now: 0))
        XCTAssertFalse(l.allow(.typing, now: 499))
        XCTAssertTrue(l.allow(.typing, now: 500), "2 per second: one token every 500 ms")
        XCTAssertFalse(l.allow(.typing, now: 500))
        XCTAssertTrue(l.allow(.typing, now: 1_000))
        // A long pause refills to the burst only.
        for _ in 0..<3 { XCTAssertTrue(l.allow(.typing, now: 60_000)) }
        XCTAssertFalse(l.allow(.typing, now: 60_000))
    }

    func testClassesAreIndependent() {
        var l = EventRateLimiter(
            overall: Budget(perSecond: 1_000, burst: 1_000),
            perClass: [.typing: Budget(perSecond: 1, burst: 2), .reaction: Budget(perSecond: 1, burst: 1)], now: 0)
        XCTAssertTrue(l.allow(.typing, now: 0))
        XCTAssertTrue(l.allow(.typing, now: 0))
        XCTAssertFalse(l.allow(.typing, now: 0))
        // Exhausting typing leaves reaction untouched.
        XCTAssertTrue(l.allow(.reaction, now: 0))
        XCTAssertFalse(l.allow(.reaction, now: 0))
        XCTAssertFalse(l.allow(.typing, now: 0))
        // Classes without their own budget only use the overall one.
        for _ in 0..<50 { XCTAssertTrue(l.allow(.location, now: 0)) }
        XCTAssertFalse(l.allow(.typing, now: 0))
    }

    func testOverallBudgetAppliesOnTopOfClasses() {
        var l = EventRateLimiter(
            overall: Budget(perSecond: 1, burst: 3),
            perClass: [.typing: Budget(perSecond: 100, burst: 100), .custom: Budget(perSecond: 100, burst: 100)], now: 0)
        XCTAssertTrue(l.allow(.typing, now: 0))
        XCTAssertTrue(l.allow(.custom, now: 0))
        XCTAssertTrue(l.allow(.control, now: 0))
        XCTAssertFalse(l.allow(.typing, now: 0))
        XCTAssertFalse(l.allow(.custom, now: 0))
        XCTAssertFalse(l.allow(.receipt, now: 0))
        XCTAssertTrue(l.allow(.receipt, now: 1_000))
        XCTAssertFalse(l.allow(.receipt, now: 1_000))
    }

    func testClassRefusalDoesNotConsumeOverall() {
        var l = EventRateLimiter(overall: Budget(perSecond: 0, burst: 2), perClass: [.typing: Budget(perSecond: 0, burst: 1)], now: 0)
        XCTAssertTrue(l.allow(.typing, now: 0))
        // These are refused by the typing class and must not drain the overall budget.
        for _ in 0..<10 { XCTAssertFalse(l.allow(.typing, now: 0)) }
        XCTAssertTrue(l.allow(.control, now: 0), "one overall token is left")
        XCTAssertFalse(l.allow(.control, now: 0))
    }

    func testEveryClassCanHaveABudget() {
        var budgets: [RateClass: Budget] = [:]
        for c in RateClass.allCases { budgets[c] = Budget(perSecond: 0, burst: 1) }
        var l = EventRateLimiter(overall: Budget(perSecond: 0, burst: 100), perClass: budgets, now: 0)
        for c in RateClass.allCases {
            XCTAssertTrue(l.allow(c, now: 0), c.rawValue)
            XCTAssertFalse(l.allow(c, now: 0), c.rawValue)
        }
    }

    func testLimitersAreIndependentValues() {
        let fresh = EventRateLimiter(overall: Budget(perSecond: 0, burst: 1), perClass: [:], now: 0)
        var a = fresh
        var b = fresh
        XCTAssertTrue(a.allow(.control, now: 0))
        XCTAssertFalse(a.allow(.control, now: 0))
        XCTAssertTrue(b.allow(.control, now: 0), "one connection's use does not spend another's budget")
    }
}
