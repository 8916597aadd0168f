import RelayTestSupport
import XCTest
@testable import RelayCore

final class TypingDebouncerTests: XCTestCase {
    private let c1 = ConnectionID(1)
    private let c2 = ConnectionID(2)
    private let c3 = ConnectionID(3)

    private func start(_ room: String, _ user: String) -> TypingDebouncer.Change { .init(room: room, user: user, isTyping: true) }
    private func stop(_ room: String, _ user: String) -> TypingDebouncer.Change { .init(room: room, user: user, isTyping: false) }

    func testDefaults() {
        let d = TypingDebouncer(windowMs: 100, expiryMs: 5_000)
        XCTAssertEqual(d.window, 100)
        XCTAssertEqual(d.expiry, 5_000)
        XCTAssertNil(d.nextDeadline)
        XCTAssertEqual(d.activeRoomCount, 0)
    }

    // MARK: - Window

    func testFirstChangeOpensAWindowAndOneFlushCarriesIt() {
        var d = TypingDebouncer(windowMs: 100, expiryMs: 5_000)
        d.start(room: "r", user: "alice", connection: c1, now: 1_000)
        XCTAssertEqual(d.nextDeadline, 1_100)
        XCTAssertEqual(d.typingUsers(room: "r"), [], "nothing is announced before the window closes")
        XCTAssertEqual(d.flush(now: 1_000), [])
        XCTAssertEqual(d.flush(now: 1_099), [])
        XCTAssertEqual(d.flush(now: 1_100), [start("r", "alice")])
        XCTAssertEqual(d.typingUsers(room: "r"), ["alice"])
        // Nothing more to flush; the next deadline is the expiry of the start.
        XCTAssertEqual(d.flush(now: 1_100), [])
        XCTAssertEqual(d.nextDeadline, 6_000)
    }

    func testLaterChangesJoinTheOpenWindowWithoutExtendingIt() {
        var d = TypingDebouncer(windowMs: 100, expiryMs: 5_000)
        d.start(room: "r", user: "bob", connection: c1, now: 0)
        d.start(room: "r", user: "alice", connection: c2, now: 60)
        d.start(room: "r", user: "carol", connection: c3, now: 99)
        XCTAssertEqual(d.nextDeadline, 100)
        XCTAssertEqual(d.flush(now: 100), [start("r", "alice"), start("r", "bob"), start("r", "carol")])
    }

    func testLateFlushStillCarriesTheNetChanges() {
        var d = TypingDebouncer(windowMs: 100, expiryMs: 5_000)
        d.start(room: "r", user: "alice", connection: c1, now: 0)
        XCTAssertEqual(d.flush(now: 450), [start("r", "alice")])
    }

    func testStartAndStopInsideOneWindowCancel() {
        var d = TypingDebouncer(windowMs: 100, expiryMs: 5_000)
        d.start(room: "r", user: "alice", connection: c1, now: 0)
        d.stop(room: "r", user: "alice", now: 40)
        XCTAssertEqual(d.nextDeadline, 100)
        XCTAssertEqual(d.flush(now: 100), [])
        XCTAssertEqual(d.typingUsers(room: "r"), [])
        XCTAssertEqual(d.activeRoomCount, 0, "a room with nothing to say is forgotten")
        XCTAssertNil(d.nextDeadline)
    }

    func testStartStopStartInsideOneWindowIsOneStart() {
        var d = TypingDebouncer(windowMs: 100, expiryMs: 5_000)
        d.start(room: "r", user: "alice", connection: c1, now: 0)
        d.stop(room: "r", user: "alice", now: 10)
        d.start(room: "r", user: "alice", connection: c1, now: 20)
        XCTAssertEqual(d.flush(now: 100), [start("r", "alice")])
    }

    func testRepeatedStartsCollapseToOne() {
        var d = TypingDebouncer(windowMs: 100, expiryMs: 5_000)
        for t in stride(from: Int64(0), through: 90, by: 10) {
            d.start(room: "r", user: "alice", connection: c1, now: t)
        }
        XCTAssertEqual(d.nextDeadline, 100)
        XCTAssertEqual(d.flush(now: 100), [start("r", "alice")])
        // Refreshing an announced start opens no window and emits nothing.
        for t in stride(from: Int64(150), through: 1_000, by: 50) {
            d.start(room: "r", user: "alice", connection: c1, now: t)
            XCTAssertEqual(d.nextDeadline, t + 5_000)
            XCTAssertEqual(d.flush(now: t), [])
        }
        XCTAssertEqual(d.flush(now: 5_999), [])
        XCTAssertEqual(d.typingUsers(room: "r"), ["alice"])
    }

    func testStopAfterAnnouncedStartIsFlushedAtWindowEnd() {
        var d = TypingDebouncer(windowMs: 100, expiryMs: 5_000)
        d.start(room: "r", user: "alice", connection: c1, now: 0)
        XCTAssertEqual(d.flush(now: 100), [start("r", "alice")])
        d.stop(room: "r", user: "alice", now: 300)
        XCTAssertEqual(d.nextDeadline, 400)
        XCTAssertEqual(d.typingUsers(room: "r"), ["alice"], "the room still believes alice types until the flush")
        XCTAssertEqual(d.flush(now: 399), [])
        XCTAssertEqual(d.flush(now: 400), [stop("r", "alice")])
        XCTAssertEqual(d.typingUsers(room: "r"), [])
        XCTAssertEqual(d.activeRoomCount, 0)
        XCTAssertNil(d.nextDeadline)
    }

    func testStopThenStartInsideOneWindowCancelAfterAnnouncement() {
        var d = TypingDebouncer(windowMs: 100, expiryMs: 5_000)
        d.start(room: "r", user: "alice", connection: c1, now: 0)
        XCTAssertEqual(d.flush(now: 100), [start("r", "alice")])
        d.stop(room: "r", user: "alice", now: 200)
        d.start(room: "r", user: "alice", connection: c1, now: 250)
        XCTAssertEqual(d.flush(now: 300), [])
        XCTAssertEqual(d.typingUsers(room: "r"), ["alice"])
        // The start at 250 refreshed the expiry.
        XCTAssertEqual(d.nextDeadline, 5_250)
    }

    func testStopWithoutStartIsIgnored() {
        var d = TypingDebouncer(windowMs: 100, expiryMs: 5_000)
        d.stop(room: "r", user: "alice", now: 0)
        XCTAssertNil(d.nextDeadline)
        XCTAssertEqual(d.activeRoomCount, 0)
        XCTAssertEqual(d.flush(now: 1_000), [])
        // A second stop of an already stopped user does nothing either.
        d.start(room: "r", user: "alice", connection: c1, now: 1_000)
        XCTAssertEqual(d.flush(now: 1_100), [start("r", "alice")])
        d.stop(room: "r", user: "alice", now: 1_200)
        d.stop(room: "r", user: "alice", now: 1_250)
        XCTAssertEqual(d.nextDeadline, 1_300)
        XCTAssertEqual(d.flush(now: 1_300), [stop("r", "alice")])
        d.stop(room: "r", user: "alice", now: 1_400)
        XCTAssertNil(d.nextDeadline)
    }

    // MARK: - Expiry

    func testUnrefreshedStartExpiresAsAStop() {
        var d = TypingDebouncer(windowMs: 100, expiryMs: 5_000)
        d.start(room: "r", user: "alice", connection: c1, now: 0)
        XCTAssertEqual(d.flush(now: 100), [start("r", "alice")])
        XCTAssertEqual(d.nextDeadline, 5_000)
        XCTAssertEqual(d.flush(now: 4_999), [])
        XCTAssertEqual(d.typingUsers(room: "r"), ["alice"])
        // At the deadline the start expires; that change opens a window like any other.
        XCTAssertEqual(d.flush(now: 5_000), [])
        XCTAssertEqual(d.nextDeadline, 5_100)
        XCTAssertEqual(d.flush(now: 5_099), [])
        XCTAssertEqual(d.flush(now: 5_100), [stop("r", "alice")])
        XCTAssertEqual(d.typingUsers(room: "r"), [])
        XCTAssertNil(d.nextDeadline)
        XCTAssertEqual(d.activeRoomCount, 0)
    }

    func testExpiryWithALateFlushIsDeliveredAtOnce() {
        var d = TypingDebouncer(windowMs: 100, expiryMs: 5_000)
        d.start(room: "r", user: "alice", connection: c1, now: 0)
        XCTAssertEqual(d.flush(now: 100), [start("r", "alice")])
        XCTAssertEqual(d.flush(now: 9_000), [stop("r", "alice")])
        XCTAssertNil(d.nextDeadline)
    }

    func testRefreshPostponesExpiry() {
        var d = TypingDebouncer(windowMs: 100, expiryMs: 5_000)
        d.start(room: "r", user: "alice", connection: c1, now: 0)
        XCTAssertEqual(d.flush(now: 100), [start("r", "alice")])
        d.start(room: "r", user: "alice", connection: c1, now: 4_000)
        XCTAssertEqual(d.nextDeadline, 9_000)
        XCTAssertEqual(d.flush(now: 5_100), [])
        XCTAssertEqual(d.flush(now: 8_999), [])
        XCTAssertEqual(d.typingUsers(room: "r"), ["alice"])
        XCTAssertEqual(d.flush(now: 9_000), [])
        XCTAssertEqual(d.flush(now: 9_100), [stop("r", "alice")])
    }

    func testStartThatExpiresBeforeItsFirstFlushIsNeverAnnounced() {
        var d = TypingDebouncer(windowMs: 100, expiryMs: 5_000)
        d.start(room: "r", user: "alice", connection: c1, now: 0)
        XCTAssertEqual(d.flush(now: 6_000), [])
        XCTAssertEqual(d.activeRoomCount, 0)
        XCTAssertNil(d.nextDeadline)
    }

    func testExpiryJoinsAnAlreadyOpenWindow() {
        var d = TypingDebouncer(windowMs: 100, expiryMs: 5_000)
        d.start(room: "r", user: "alice", connection: c1, now: 0)
        XCTAssertEqual(d.flush(now: 100), [start("r", "alice")])
        d.start(room: "r", user: "bob", connection: c2, now: 4_950)  // window closes at 5_050
        XCTAssertEqual(d.nextDeadline, 5_000)
        XCTAssertEqual(d.flush(now: 5_000), [])  // alice expires, joins bob's window
        XCTAssertEqual(d.nextDeadline, 5_050)
        XCTAssertEqual(d.flush(now: 5_050), [stop("r", "alice"), start("r", "bob")])
    }

    func testSimultaneousExpiriesUseTheEarliestExpiryWhateverTheOrder() {
        // Twenty users' starts expire between 5_000 and 5_095; the flush runs late, at 5_099.
        // The earliest expiry (5_000) opens the window, so it closes at 5_100 for all of them,
        // independent of the order in which the entries happen to be stored.
        var d = TypingDebouncer(windowMs: 100, expiryMs: 5_000)
        let users = (0..<20).map { "u" + ($0 < 10 ? "0" : "") + String($0) }
        for (i, user) in users.enumerated() {
            d.start(room: "r", user: user, connection: ConnectionID(UInt64(i)), now: Int64(i) * 5)
        }
        XCTAssertEqual(d.flush(now: 100), users.map { start("r", $0) })
        XCTAssertEqual(d.flush(now: 5_099), [])
        XCTAssertEqual(d.nextDeadline, 5_100)
        XCTAssertEqual(d.flush(now: 5_100), users.map { stop("r", $0) })
    }

    // MARK: - Connections

    func testConnectionClosedStopsItsTypingEverywhere() {
        var d = TypingDebouncer(windowMs: 100, expiryMs: 5_000)
        d.start(room: "r", user: "alice", connection: c1, now: 0)
        d.start(room: "s", user: "alice", connection: c1, now: 0)
        d.start(room: "r", user: "bob", connection: c2, now: 0)
        XCTAssertEqual(d.flush(now: 100), [start("r", "alice"), start("r", "bob"), start("s", "alice")])
        d.connectionClosed(c1, now: 200)
        XCTAssertEqual(d.nextDeadline, 300)
        XCTAssertEqual(d.flush(now: 300), [stop("r", "alice"), stop("s", "alice")])
        XCTAssertEqual(d.typingUsers(room: "r"), ["bob"])
        XCTAssertEqual(d.typingUsers(room: "s"), [])
    }

    func testConnectionClosedInsideTheWindowCancels() {
        var d = TypingDebouncer(windowMs: 100, expiryMs: 5_000)
        d.start(room: "r", user: "alice", connection: c1, now: 0)
        d.connectionClosed(c1, now: 50)
        XCTAssertEqual(d.flush(now: 100), [])
        XCTAssertEqual(d.activeRoomCount, 0)
    }

    func testConnectionClosedWithoutTypingDoesNothing() {
        var d = TypingDebouncer(windowMs: 100, expiryMs: 5_000)
        d.start(room: "r", user: "alice", connection: c1, now: 0)
        XCTAssertEqual(d.flush(now: 100), [start("r", "alice")])
        d.connectionClosed(c2, now: 200)
        XCTAssertEqual(d.nextDeadline, 5_000)
        XCTAssertEqual(d.flush(now: 300), [])
    }

    func testConnectionClosedOnlyStopsStartsFromThatConnection() {
        var d = TypingDebouncer(windowMs: 100, expiryMs: 5_000)
        // alice types on her phone (c1), then on her laptop (c2): the latest start owns the entry.
        d.start(room: "r", user: "alice", connection: c1, now: 0)
        d.start(room: "r", user: "alice", connection: c2, now: 50)
        XCTAssertEqual(d.flush(now: 100), [start("r", "alice")])
        d.connectionClosed(c1, now: 200)
        XCTAssertEqual(d.flush(now: 300), [])
        XCTAssertEqual(d.typingUsers(room: "r"), ["alice"])
        d.connectionClosed(c2, now: 400)
        XCTAssertEqual(d.flush(now: 500), [stop("r", "alice")])
    }

    func testConnectionLeftStopsOneRoomOnly() {
        var d = TypingDebouncer(windowMs: 100, expiryMs: 5_000)
        d.start(room: "r", user: "alice", connection: c1, now: 0)
        d.start(room: "s", user: "alice", connection: c1, now: 0)
        XCTAssertEqual(d.flush(now: 100), [start("r", "alice"), start("s", "alice")])
        d.connectionLeft(c1, room: "r", now: 200)
        d.connectionLeft(c1, room: "unknown", now: 200)
        XCTAssertEqual(d.flush(now: 300), [stop("r", "alice")])
        XCTAssertEqual(d.typingUsers(room: "s"), ["alice"])
    }

    // MARK: - Rooms

    func testRoomsAreIndependent() {
        var d = TypingDebouncer(windowMs: 100, expiryMs: 5_000)
        d.start(room: "r1", user: "alice", connection: c1, now: 0)
        d.start(room: "r2", user: "alice", connection: c1, now: 60)
        XCTAssertEqual(d.activeRoomCount, 2)
        XCTAssertEqual(d.nextDeadline, 100)
        XCTAssertEqual(d.flush(now: 100), [start("r1", "alice")])
        XCTAssertEqual(d.nextDeadline, 160)
        XCTAssertEqual(d.flush(now: 160), [start("r2", "alice")])
        d.stop(room: "r1", user: "alice", now: 200)
        XCTAssertEqual(d.flush(now: 300), [stop("r1", "alice")])
        XCTAssertEqual(d.typingUsers(room: "r1"), [])
        XCTAssertEqual(d.typingUsers(room: "r2"), ["alice"])
        XCTAssertEqual(d.activeRoomCount, 1)
    }

    func testFlushOrdersByRoomThenUser() {
        var d = TypingDebouncer(windowMs: 100, expiryMs: 5_000)
        for (room, user) in [("b", "z"), ("a", "y"), ("b", "a"), ("a", "x")] {
            d.start(room: room, user: user, connection: c1, now: 0)
        }
        XCTAssertEqual(d.flush(now: 100), [start("a", "x"), start("a", "y"), start("b", "a"), start("b", "z")])
    }

    func testAtMostOneFlushPerWindowPerRoomUnderChurn() {
        var d = TypingDebouncer(windowMs: 100, expiryMs: 5_000)
        var flushTimes: [String: [Int64]] = [:]
        // Start/stop churn every 7 ms from three users, flushing whenever a deadline is due.
        for now in Int64(0)...3_000 {
            if now % 7 == 0 {
                let user = ["alice", "bob", "carol"][Int(now / 7) % 3]
                if (now / 21) % 2 == 0 {
                    d.start(room: "r", user: user, connection: c1, now: now)
                } else {
                    d.stop(room: "r", user: user, now: now)
                }
            }
            if let deadline = d.nextDeadline, deadline <= now {
                let changes = d.flush(now: now)
                if !changes.isEmpty { flushTimes["r", default: []].append(now) }
            }
        }
        let times = flushTimes["r"] ?? []
        XCTAssertFalse(times.isEmpty)
        for (a, b) in zip(times, times.dropFirst()) {
            XCTAssertGreaterThanOrEqual(b - a, 100, "flushes at \(a) and \(b)")
        }
    }

    /// Random operations against a simple model: after every flush of a room, the users the room
    /// was told are typing are exactly those whose latest input is a start younger than the expiry.
    func testRandomisedAgainstModel() {
        struct ModelEntry { var typing: Bool; var refreshedAt: Int64; var connection: ConnectionID }
        var rng = SplitMix64(seed: 42)
        let rooms = ["r1", "r2", "r3"]
        let users = ["u1", "u2", "u3", "u4"]
        let connections = (1...5).map { ConnectionID(UInt64($0)) }

        for _ in 0..<20 {
            var d = TypingDebouncer(windowMs: 100, expiryMs: 5_000)
            var model: [String: [String: ModelEntry]] = [:]
            var lastFlush: [String: Int64] = [:]
            var announced: [String: [String: Bool]] = [:]
            func effective(_ e: ModelEntry, _ now: Int64) -> Bool { e.typing && e.refreshedAt + 5_000 > now }

            var now: Int64 = 0
            while now < 20_000 {
                now += Int64.random(in: 0...300, using: &rng)
                // Flush everything due up to `now`, one deadline at a time, as a timer would.
                while let deadline = d.nextDeadline, deadline <= now {
                    let changes = d.flush(now: deadline)
                    for change in changes {
                        let before = announced[change.room, default: [:]][change.user] ?? false
                        XCTAssertNotEqual(before, change.isTyping, "a change must toggle what the room knows")
                        announced[change.room, default: [:]][change.user] = change.isTyping
                    }
                    for room in Set(changes.map(\.room)) {
                        if let last = lastFlush[room] { XCTAssertGreaterThanOrEqual(deadline - last, 100) }
                        lastFlush[room] = deadline
                        let expected = (model[room] ?? [:]).filter { effective($0.value, deadline) }.map(\.key).sorted()
                        XCTAssertEqual(d.typingUsers(room: room), expected, "room \(room) at \(deadline)")
                    }
                }
                let room = rooms.randomElement(using: &rng)!
                let user = users.randomElement(using: &rng)!
                let conn = connections.randomElement(using: &rng)!
                switch Int.random(in: 0..<10, using: &rng) {
                case 0..<5:
                    d.start(room: room, user: user, connection: conn, now: now)
                    model[room, default: [:]][user] = ModelEntry(typing: true, refreshedAt: now, connection: conn)
                case 5..<8:
                    d.stop(room: room, user: user, now: now)
                    model[room]?[user]?.typing = false
                case 8:
                    d.connectionClosed(conn, now: now)
                    for (r, entries) in model {
                        for (u, e) in entries where e.connection == conn && effective(e, now) { model[r]![u]!.typing = false }
                    }
                default:
                    d.connectionLeft(conn, room: room, now: now)
                    for (u, e) in model[room] ?? [:] where e.connection == conn && effective(e, now) { model[room]![u]!.typing = false }
                }
            }
            // Quiesce: everything eventually expires and the debouncer forgets every room.
            while let deadline = d.nextDeadline { _ = d.flush(now: deadline) }
            for room in rooms { XCTAssertEqual(d.typingUsers(room: room), []) }
            XCTAssertEqual(d.activeRoomCount, 0)
        }
    }

    func testCustomWindowAndExpiry() {
        var d = TypingDebouncer(windowMs: 250, expiryMs: 1_000)
        d.start(room: "r", user: "alice", connection: c1, now: 0)
        XCTAssertEqual(d.nextDeadline, 250)
        XCTAssertEqual(d.flush(now: 250), [start("r", "alice")])
        XCTAssertEqual(d.nextDeadline, 1_000)
        XCTAssertEqual(d.flush(now: 1_000), [])
        XCTAssertEqual(d.flush(now: 1_250), [stop("r", "alice")])
    }
}
