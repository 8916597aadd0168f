import RelayTestSupport
import XCTest
@testable import RelayCore

final class LiveLocationSharesTests: XCTestCase {
    private let c1 = ConnectionID(1)
    private let c2 = ConnectionID(2)
    private typealias Key = LiveLocationShares.Key

    private func assertUpdateAllowed(_ s: LiveLocationShares, _ room: String, _ user: String, now: Int64,
                                     file: StaticString = #filePath, line: UInt = #line) {
        do { try s.checkUpdate(room: room, user: user, now: now) } catch {
            XCTFail("update refused: \(error)", file: file, line: line)
        }
    }

    private func assertUpdateRefused(_ s: LiveLocationShares, _ room: String, _ user: String, now: Int64,
                                     file: StaticString = #filePath, line: UInt = #line) {
        do {
            try s.checkUpdate(room: room, user: user, now: now)
            XCTFail("update allowed", file: file, line: line)
        } catch {
            XCTAssertEqual(error.code, .noLiveShare, file: file, line: line)
            XCTAssertEqual(error.code.rawValue, "no_live_share", file: file, line: line)
        }
    }

    private func start(_ s: inout LiveLocationShares, _ room: String, _ user: String, _ conn: ConnectionID,
                       seconds: Int64, now: Int64, file: StaticString = #filePath, line: UInt = #line) -> Int64? {
        do { return try s.start(room: room, user: user, connection: conn, durationSec: seconds, now: now) } catch {
            XCTFail("unexpected \(error)", file: file, line: line)
            return nil
        }
    }

    func testUpdateRefusedWithoutAShare() {
        let s = LiveLocationShares(maxSharesPerConnection: 16)
        assertUpdateRefused(s, "r", "alice", now: 0)
        XCTAssertEqual(s.count, 0)
        XCTAssertNil(s.nextDeadline)
    }

    func testShareAllowsUpdatesUntilItsEnd() {
        var s = LiveLocationShares(maxSharesPerConnection: 16)
        XCTAssertEqual(start(&s, "r", "alice", c1, seconds: 60, now: 1_000), 61_000)
        XCTAssertEqual(s.count, 1)
        XCTAssertEqual(s.nextDeadline, 61_000)
        assertUpdateAllowed(s, "r", "alice", now: 1_000)
        assertUpdateAllowed(s, "r", "alice", now: 60_999)
        assertUpdateRefused(s, "r", "alice", now: 61_000)
        assertUpdateRefused(s, "r", "alice", now: 100_000)
        // Shares are per room and per user.
        assertUpdateRefused(s, "other", "alice", now: 2_000)
        assertUpdateRefused(s, "r", "bob", now: 2_000)
    }

    func testRestartExtends() {
        var s = LiveLocationShares(maxSharesPerConnection: 16)
        _ = start(&s, "r", "alice", c1, seconds: 10, now: 0)
        XCTAssertEqual(start(&s, "r", "alice", c1, seconds: 30, now: 5_000), 35_000)
        XCTAssertEqual(s.count, 1)
        assertUpdateAllowed(s, "r", "alice", now: 20_000)
        XCTAssertEqual(s.nextDeadline, 35_000)
    }

    func testStop() {
        var s = LiveLocationShares(maxSharesPerConnection: 16)
        _ = start(&s, "r", "alice", c1, seconds: 60, now: 0)
        XCTAssertTrue(s.stop(room: "r", user: "alice"))
        assertUpdateRefused(s, "r", "alice", now: 1)
        XCTAssertFalse(s.stop(room: "r", user: "alice"), "nothing left to stop")
        XCTAssertFalse(s.stop(room: "x", user: "y"))
        XCTAssertEqual(s.count, 0)
        XCTAssertNil(s.nextDeadline)
    }

    func testExpire() {
        var s = LiveLocationShares(maxSharesPerConnection: 16)
        _ = start(&s, "r2", "bob", c2, seconds: 10, now: 0)
        _ = start(&s, "r1", "alice", c1, seconds: 10, now: 0)
        _ = start(&s, "r1", "carol", c1, seconds: 20, now: 0)
        XCTAssertEqual(s.nextDeadline, 10_000)
        XCTAssertEqual(s.expire(now: 9_999), [])
        XCTAssertEqual(s.expire(now: 10_000), [Key(room: "r1", user: "alice"), Key(room: "r2", user: "bob")])
        XCTAssertEqual(s.count, 1)
        XCTAssertEqual(s.nextDeadline, 20_000)
        assertUpdateRefused(s, "r1", "alice", now: 5_000)  // removed, even though the time is earlier
        assertUpdateAllowed(s, "r1", "carol", now: 15_000)
        XCTAssertEqual(s.expire(now: 50_000), [Key(room: "r1", user: "carol")])
        XCTAssertEqual(s.expire(now: 50_000), [])
        XCTAssertNil(s.nextDeadline)
    }

    func testConnectionClosedEndsItsShares() {
        var s = LiveLocationShares(maxSharesPerConnection: 16)
        _ = start(&s, "r2", "alice", c1, seconds: 60, now: 0)
        _ = start(&s, "r1", "alice", c1, seconds: 60, now: 0)
        _ = start(&s, "r1", "bob", c2, seconds: 60, now: 0)
        XCTAssertEqual(s.connectionClosed(c1), [Key(room: "r1", user: "alice"), Key(room: "r2", user: "alice")])
        assertUpdateRefused(s, "r1", "alice", now: 1)
        assertUpdateRefused(s, "r2", "alice", now: 1)
        assertUpdateAllowed(s, "r1", "bob", now: 1)
        XCTAssertEqual(s.connectionClosed(c1), [])
        XCTAssertEqual(s.count, 1)
    }

    func testShareMovesToTheConnectionThatRestartedIt() {
        var s = LiveLocationShares(maxSharesPerConnection: 16)
        _ = start(&s, "r", "alice", c1, seconds: 60, now: 0)
        _ = start(&s, "r", "alice", c2, seconds: 60, now: 0)
        XCTAssertEqual(s.connectionClosed(c1), [])
        assertUpdateAllowed(s, "r", "alice", now: 1)
        XCTAssertEqual(s.connectionClosed(c2), [Key(room: "r", user: "alice")])
    }

    func testConnectionLeftEndsOneRoom() {
        var s = LiveLocationShares(maxSharesPerConnection: 16)
        _ = start(&s, "r1", "alice", c1, seconds: 60, now: 0)
        _ = start(&s, "r2", "alice", c1, seconds: 60, now: 0)
        XCTAssertEqual(s.connectionLeft(c2, room: "r1"), [])
        XCTAssertEqual(s.connectionLeft(c1, room: "r1"), [Key(room: "r1", user: "alice")])
        assertUpdateRefused(s, "r1", "alice", now: 1)
        assertUpdateAllowed(s, "r2", "alice", now: 1)
    }

    func testPerConnectionShareLimit() {
        var s = LiveLocationShares(maxSharesPerConnection: 2)
        _ = start(&s, "r1", "alice", c1, seconds: 60, now: 0)
        _ = start(&s, "r2", "alice", c1, seconds: 60, now: 0)
        do {
            try s.start(room: "r3", user: "alice", connection: c1, durationSec: 60, now: 0)
            XCTFail("expected rate_limited")
        } catch {
            XCTAssertEqual(error.code, .rateLimited)
        }
        XCTAssertEqual(s.count, 2)
        // Extending an existing share is not a new share.
        XCTAssertEqual(start(&s, "r1", "alice", c1, seconds: 120, now: 0), 120_000)
        // Another connection has its own budget.
        XCTAssertNotNil(start(&s, "r3", "bob", c2, seconds: 60, now: 0))
        // Stopping frees a slot.
        s.stop(room: "r2", user: "alice")
        XCTAssertNotNil(start(&s, "r3", "alice", c1, seconds: 60, now: 0))
        XCTAssertEqual(LiveLocationShares(maxSharesPerConnection: 16).maxSharesPerConnection, 16)
    }

    func testKeyOrdering() {
        XCTAssertLessThan(Key(room: "a", user: "z"), Key(room: "b", user: "a"))
        XCTAssertLessThan(Key(room: "a", user: "a"), Key(room: "a", user: "b"))
        XCTAssertFalse(Key(room: "a", user: "a") < Key(room: "a", user: "a"))
    }

    func testMaxDurationFromValidator() throws {
        var s = LiveLocationShares(maxSharesPerConnection: 16)
        let (_, duration) = try EventValidator.shareLive(["room": "r", "durationSec": .int(EventValidator.maxLiveShareSeconds)])
        XCTAssertEqual(start(&s, "r", "alice", c1, seconds: duration, now: 0), 8 * 3600 * 1000)
    }

    /// The per-connection index stays right when a user's share in a room moves to another of
    /// their connections: the old connection's close no longer ends it, the new one's does, and
    /// each connection's limit counts only the shares it holds.
    func testAShareMovedToAnotherConnectionBelongsToIt() throws {
        var s = LiveLocationShares(maxSharesPerConnection: 2)
        _ = start(&s, "r", "alice", c1, seconds: 60, now: 0)
        _ = start(&s, "r", "alice", c2, seconds: 60, now: 1_000)
        XCTAssertEqual(s.count, 1)
        XCTAssertEqual(s.connectionClosed(c1), [], "the share is c2's now")
        assertUpdateAllowed(s, "r", "alice", now: 2_000)
        // c1 holds none, so it may start two.
        _ = start(&s, "a", "alice", c1, seconds: 60, now: 2_000)
        _ = start(&s, "b", "alice", c1, seconds: 60, now: 2_000)
        XCTAssertThrowsError(try s.start(room: "c", user: "alice", connection: c1, durationSec: 60, now: 2_000))
        XCTAssertEqual(s.connectionLeft(c1, room: "a"), [Key(room: "a", user: "alice")])
        XCTAssertEqual(s.connectionClosed(c2), [Key(room: "r", user: "alice")])
        XCTAssertEqual(s.connectionClosed(c1), [Key(room: "b", user: "alice")])
        XCTAssertEqual(s.count, 0)
        XCTAssertNil(s.nextDeadline)
    }

    /// A disconnect ends only its own shares among many (and finds them without the others).
    func testClosingOneConnectionAmongManyEndsOnlyItsShares() {
        var s = LiveLocationShares(maxSharesPerConnection: 16)
        for n in 0..<1_000 { _ = start(&s, "room\(n)", "u\(n)", ConnectionID(UInt64(10 + n)), seconds: 60, now: 0) }
        _ = start(&s, "mine", "alice", c1, seconds: 60, now: 0)
        XCTAssertEqual(s.connectionClosed(c1), [Key(room: "mine", user: "alice")])
        XCTAssertEqual(s.count, 1_000)
        XCTAssertEqual(s.expire(now: 60_000).count, 1_000)
        XCTAssertEqual(s.connectionClosed(ConnectionID(10)), [], "expired shares left the index too")
    }
}
