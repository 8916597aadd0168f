import NIOConcurrencyHelpers
import XCTest

@testable import RelayServer
@testable import RelayBackends

/// A callback read on every call must not grow: a function-typed value read through a generic
/// lock's `inout` gained one thunk per read and overflowed the stack after ~40 000 reads.
final class CallbackSlotTests: XCTestCase {
    func testAMillionReadsCallTheSameCallback() {
        let slot = CallbackSlot<@Sendable (Int, String) -> Int>()
        XCTAssertNil(slot.value)
        slot.set { n, s in n + s.utf8.count }
        var total = 0
        for i in 0..<1_000_000 {
            total &+= slot.value?(i & 1, "ab") ?? 0
        }
        XCTAssertEqual(total, 2_500_000)
    }
}
