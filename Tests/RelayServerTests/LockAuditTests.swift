import XCTest

@testable import RelayServer
@testable import RelayBackends

/// The debug-build check behind "no lock held across I/O": audited locks count themselves per
/// thread, and the socket and HTTP write paths assert the count is zero (every test that runs
/// the debug build through them checks it).
final class LockAuditTests: XCTestCase {
    func testAuditedLocksCountPerThread() throws {
        #if DEBUG
        let outer = AuditedLock(0)
        let inner = AuditedLock("x")
        XCTAssertTrue(LockAudit.noneHeld())
        outer.withLockedValue { value in
            value += 1
            XCTAssertFalse(LockAudit.noneHeld())
            inner.withLockedValue { _ in XCTAssertFalse(LockAudit.noneHeld()) }
            // Another thread holds nothing of ours.
            let other = expectation(description: "other thread")
            Thread.detachNewThread {
                XCTAssertTrue(LockAudit.noneHeld())
                other.fulfill()
            }
            wait(for: [other], timeout: 10)
            XCTAssertFalse(LockAudit.noneHeld())
        }
        XCTAssertTrue(LockAudit.noneHeld())
        // A typed error thrown inside still releases the count.
        struct Boom: Error {}
        XCTAssertThrowsError(try outer.withLock { (_: inout Int) throws(Boom) in throw Boom() })
        XCTAssertTrue(LockAudit.noneHeld())
        XCTAssertEqual(outer.withLockedValue { $0 }, 1)
        #else
        throw XCTSkip("the audit is compiled into debug builds only")
        #endif
    }
}
