import XCTest
@testable import RelayCore

/// Sessions kept for recovery: bounded in all and per user, oldest out first, no scan.
final class KeptSessionsTests: XCTestCase {
    func record(_ pid: String, user: String) -> KeptSession {
        KeptSession(pid: pid, socketSID: "s-\(pid)", userID: user, rooms: [], log: RecoveryLog(), disconnectedAtMs: 0)
    }

    func testTakeIsOnceAndOnlyByItsUser() {
        var kept = KeptSessions(maxRecords: 10, maxPerUser: 5)
        kept.put(record("p1", user: "alice"), nowMs: 0, windowMs: 100)
        XCTAssertEqual(kept.take(pid: "p1", user: "mallory", nowMs: 1), .otherUser)
        XCTAssertEqual(kept.take(pid: "p1", user: "alice", nowMs: 1), .taken(record("p1", user: "alice")))
        XCTAssertEqual(kept.take(pid: "p1", user: "alice", nowMs: 1), .notFound)
    }

    func testRecordsExpire() {
        var kept = KeptSessions(maxRecords: 10, maxPerUser: 5)
        kept.put(record("p1", user: "alice"), nowMs: 0, windowMs: 100)
        XCTAssertEqual(kept.take(pid: "p1", user: "alice", nowMs: 100), .notFound)
        kept.put(record("p2", user: "alice"), nowMs: 0, windowMs: 100)
        kept.sweep(nowMs: 100)
        XCTAssertEqual(kept.count, 0)
    }

    func testOneUserEvictsOnlyTheirOwnOldest() {
        var kept = KeptSessions(maxRecords: 1000, maxPerUser: 3)
        kept.put(record("bob-1", user: "bob"), nowMs: 0, windowMs: 120_000)
        for i in 0..<100_000 {
            let evicted = kept.put(record("m-\(i)", user: "mallory"), nowMs: Int64(i / 1000), windowMs: 120_000)
            XCTAssertEqual(evicted, i >= 3 ? ["m-\(i - 3)"] : [])
        }
        XCTAssertEqual(kept.count, 4, "mallory's 3 newest and bob's one")
        XCTAssertEqual(kept.take(pid: "bob-1", user: "bob", nowMs: 200), .taken(record("bob-1", user: "bob")))
        XCTAssertEqual(kept.take(pid: "m-99999", user: "mallory", nowMs: 200), .taken(record("m-99999", user: "mallory")))
        XCTAssertEqual(kept.take(pid: "m-99996", user: "mallory", nowMs: 200), .notFound)
        XCTAssertLessThan(kept.bookkeeping, 200, "evicted entries do not pile up")
    }

    func testTheStoreCapEvictsTheOldestFirst() {
        var kept = KeptSessions(maxRecords: 3, maxPerUser: 10)
        for i in 0..<3 { kept.put(record("p\(i)", user: "u\(i)"), nowMs: Int64(i), windowMs: 1000) }
        XCTAssertEqual(kept.put(record("p3", user: "u3"), nowMs: 3, windowMs: 1000), ["p0"])
        XCTAssertEqual(kept.take(pid: "p0", user: "u0", nowMs: 4), .notFound)
        XCTAssertEqual(kept.take(pid: "p1", user: "u1", nowMs: 4), .taken(record("p1", user: "u1")))
        // p1 was taken: its stale entry is skipped, p2 goes next.
        kept.put(record("p4", user: "u4"), nowMs: 5, windowMs: 1000)
        XCTAssertEqual(kept.put(record("p5", user: "u5"), nowMs: 6, windowMs: 1000), ["p2"])
    }

    func testTakenRecordsLeaveBoundedBookkeeping() {
        var kept = KeptSessions(maxRecords: 100_000, maxPerUser: 64)
        for i in 0..<50_000 {
            kept.put(record("p\(i)", user: "u\(i % 7)"), nowMs: 0, windowMs: 120_000)
            _ = kept.take(pid: "p\(i)", user: "u\(i % 7)", nowMs: 0)
        }
        XCTAssertEqual(kept.count, 0)
        XCTAssertLessThan(kept.bookkeeping, 200, "stale entries are compacted")
    }

    func testReplacingAPidKeepsOneRecord() {
        var kept = KeptSessions(maxRecords: 10, maxPerUser: 2)
        kept.put(record("p", user: "alice"), nowMs: 0, windowMs: 100)
        kept.put(record("p", user: "alice"), nowMs: 1, windowMs: 100)
        kept.put(record("q", user: "alice"), nowMs: 2, windowMs: 100)
        XCTAssertEqual(kept.count, 2)
        XCTAssertEqual(kept.take(pid: "p", user: "alice", nowMs: 3), .taken(record("p", user: "alice")))
    }
}
