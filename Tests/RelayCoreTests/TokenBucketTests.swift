import XCTest
@testable import RelayCore

final class TokenBucketTests: XCTestCase {
    func testStartsFull() {
        var b = TokenBucket(capacity: 5, ratePerSecond: 1, now: 0)
        XCTAssertEqual(b.available(now: 0), 5)
    }
}
