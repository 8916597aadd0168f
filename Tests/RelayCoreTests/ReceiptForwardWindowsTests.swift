import RelayTestSupport
import XCTest
@testable import RelayCore

/// Receipt forwards coalesced per (room, kind): a window opens at its first receipt, closes
/// `windowMs` later or at `maxItems`, in the order windows opened.
final class ReceiptForwardWindowsTests: XCTestCase {
    func r(_ id: Int64, room: String = "r", reader: String = "bob", kind: ReceiptKind = .read) -> Receipt {
        Receipt(id: id, room: room, messageID: "m\(id)", authorID: "alice", userID: reader, kind: kind, ts: 1)
    }

    func testAWindowCollectsEveryReaderUntilItCloses() {
        var w = ReceiptForwardWindows(windowMs: 100, maxItems: 100)
        XCTAssertEqual(w.add([r(1)], room: "r", kind: .read, now: 1_000), [])
        XCTAssertEqual(w.add([r(2, reader: "carol"), r(3, reader: "carol")], room: "r", kind: .read, now: 1_050), [])
        XCTAssertEqual(w.add([r(4, kind: .delivered)], room: "r", kind: .delivered, now: 1_060), [], "another kind, another window")
        XCTAssertEqual(w.nextDeadline, 1_100)
        XCTAssertEqual(w.due(now: 1_099), [])
        let due = w.due(now: 1_100)
        XCTAssertEqual(due.map(\.receipts).map { $0.map(\.id) }, [[1, 2, 3]])
        XCTAssertEqual(w.nextDeadline, 1_160)
        XCTAssertEqual(w.due(now: 1_160).map(\.kind), [.delivered])
        XCTAssertNil(w.nextDeadline)
        XCTAssertEqual(w.heldCount, 0)
    }

    func testAFullWindowIsFlushedAtOnceAndNothingWaitsTwice() {
        var w = ReceiptForwardWindows(windowMs: 100, maxItems: 3)
        XCTAssertEqual(w.add([r(1), r(2)], room: "r", kind: .read, now: 0), [])
        let full = w.add([r(3), r(4), r(5), r(6), r(7)], room: "r", kind: .read, now: 10)
        XCTAssertEqual(full.map { $0.receipts.map(\.id) }, [[1, 2, 3], [4, 5, 6]], "at most maxItems per flush")
        XCTAssertEqual(w.heldCount, 1)
        // The first window's deadline (100) is stale now; the held one opened at 10.
        XCTAssertEqual(w.nextDeadline, 110)
        XCTAssertEqual(w.due(now: 100), [])
        XCTAssertEqual(w.due(now: 110).map { $0.receipts.map(\.id) }, [[7]])
    }

    func testShutdownTakesEveryOpenWindow() {
        var w = ReceiptForwardWindows(windowMs: 100, maxItems: 100)
        _ = w.add([r(1)], room: "a", kind: .read, now: 0)
        _ = w.add([r(2, room: "b")], room: "b", kind: .read, now: 5)
        XCTAssertEqual(w.all().map(\.room), ["a", "b"])
        XCTAssertEqual(w.heldCount, 0)
        XCTAssertNil(w.nextDeadline)
    }

    func testManyWindowsStayBounded() {
        var w = ReceiptForwardWindows(windowMs: 10, maxItems: 100)
        for i in 0..<10_000 {
            _ = w.add([r(Int64(i), room: "r\(i % 50)")], room: "r\(i % 50)", kind: .read, now: Int64(i))
            _ = w.due(now: Int64(i))
        }
        XCTAssertLessThanOrEqual(w.heldCount, 50 * 10)
        _ = w.due(now: 20_000)
        XCTAssertEqual(w.heldCount, 0)
    }
}
