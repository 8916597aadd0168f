import Foundation
import XCTest

@testable import RelayServer
@testable import RelayBackends
import RelayLocks

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

    /// Every lock in Sources is an audited one (RelayLocks): a plain `NIOLock`, locked box,
    /// `NSLock`, `NSCondition` or `Mutex` elsewhere would be invisible to the write paths'
    /// assertion. Comments and string literals are not read.
    func testEveryLockInSourcesIsAudited() throws {
        let sources = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("Sources")
        let plain = try NSRegularExpression(pattern: #"\b(NIOLock|NIOLockedValueBox|NSLock|NSRecursiveLock|NSCondition|NSConditionLock|ConditionLock|Mutex|pthread_mutex_t|os_unfair_lock)\b"#)
        let noise = try NSRegularExpression(pattern: #"//.*?$|"(?:\\.|[^"\\])*""#, options: [.anchorsMatchLines])
        var found: [String] = []
        var read = 0
        let walker = FileManager.default.enumerator(at: sources, includingPropertiesForKeys: nil)
        while let url = walker?.nextObject() as? URL {
            guard url.pathExtension == "swift", !url.path.contains("/Sources/RelayLocks/") else { continue }
            read += 1
            let text = try String(contentsOf: url, encoding: .utf8)
            let code = noise.stringByReplacingMatches(in: text, range: NSRange(text.startIndex..., in: text), withTemplate: "")
            for match in plain.matches(in: code, range: NSRange(code.startIndex..., in: code)) {
                if let r = Range(match.range, in: code) { found.append("\(url.lastPathComponent): \(code[r])") }
            }
        }
        XCTAssertGreaterThan(read, 100, "read the sources")
        XCTAssertEqual(found, [], "locks that LockAudit cannot see: use AuditedLock or AuditedCondition")
    }
}
