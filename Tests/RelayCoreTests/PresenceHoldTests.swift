import RelayTestSupport
import XCTest
@testable import RelayCore

/// Presence grace in the room registry: a dropped device leaves a hold that keeps its user
/// present and the room occupied until a deadline; the user's next join takes the hold over
/// (no presence change anyone sees); holds past their deadline are released.
final class PresenceHoldTests: XCTestCase {
    private func c(_ n: UInt64) -> ConnectionID { ConnectionID(n) }

    private func join(_ reg: inout RoomRegistry, _ room: String, _ conn: UInt64, _ user: String) -> RoomRegistry.JoinResult? {
        try? reg.join(room: room, connection: c(conn), user: user, partition: 0)
    }

    func testADroppedDeviceStaysPresentUntilItsHoldEnds() {
        var reg = RoomRegistry()
        _ = join(&reg, "r", 1, "alice")
        _ = join(&reg, "r", 2, "bob")
        let left = reg.leave(room: "r", connection: c(1), holdingUntil: 5_000)
        XCTAssertEqual(left, RoomRegistry.LeaveResult(room: "r", user: "alice", userLeftPresence: false, devicesBefore: 1, devicesAfter: 1))
        XCTAssertFalse(reg.isMember(room: "r", connection: c(1)), "a held device receives nothing")
        XCTAssertEqual(reg.memberCount(room: "r"), 1)
        XCTAssertEqual(reg.presence(room: "r"), [PresenceEntry(user: "alice", devices: 1), PresenceEntry(user: "bob", devices: 1)])
        XCTAssertTrue(reg.isUserPresent(room: "r", user: "alice"))
        XCTAssertNil(reg.releaseHolds(room: "r", user: "alice", now: 4_999), "not due yet")
        XCTAssertEqual(
            reg.releaseHolds(room: "r", user: "alice", now: 5_000),
            RoomRegistry.LeaveResult(room: "r", user: "alice", userLeftPresence: true, devicesBefore: 1, devicesAfter: 0))
        XCTAssertEqual(reg.presence(room: "r"), [PresenceEntry(user: "bob", devices: 1)])
        XCTAssertNil(reg.releaseHolds(room: "r", user: "alice", now: 9_000), "released once")
    }

    func testComingBackTakesTheHoldOverWithoutAPresenceChange() {
        var reg = RoomRegistry()
        _ = join(&reg, "r", 1, "alice")
        _ = reg.leave(room: "r", connection: c(1), holdingUntil: 5_000)
        let back = join(&reg, "r", 7, "alice")
        XCTAssertEqual(back, RoomRegistry.JoinResult(alreadyMember: false, userBecamePresent: false, devicesBefore: 1, devicesAfter: 1))
        XCTAssertEqual(reg.presence(room: "r"), [PresenceEntry(user: "alice", devices: 1)])
        XCTAssertNil(reg.releaseHolds(room: "r", user: "alice", now: 5_000), "the hold was taken over: nothing to end")
        XCTAssertEqual(reg.holdCount(room: "r"), 0)
    }

    func testAHeldRoomStaysOccupiedAndGoesWithItsLastHold() {
        var reg = RoomRegistry()
        _ = join(&reg, "r", 1, "alice")
        _ = reg.leave(room: "r", connection: c(1), holdingUntil: 5_000)
        XCTAssertTrue(reg.isOccupied(room: "r"), "no member, but a hold: occupied")
        XCTAssertEqual(reg.memberCount(room: "r"), 0)
        XCTAssertEqual(reg.partitions(room: "r"), [], "nobody to deliver to")
        _ = reg.releaseHolds(room: "r", user: "alice", now: 5_000)
        XCTAssertFalse(reg.isOccupied(room: "r"))
        XCTAssertEqual(reg.roomCount, 0, "an empty room is removed")
    }

    func testEachHoldEndsAtItsOwnDeadline() {
        // Two drops of the same user: the first comes back, the second does not. The first
        // deadline must not end the second's hold.
        var reg = RoomRegistry()
        _ = join(&reg, "r", 1, "alice")
        _ = join(&reg, "r", 2, "alice")
        XCTAssertEqual(reg.leave(room: "r", connection: c(1), holdingUntil: 5_000)?.devicesAfter, 2)
        _ = join(&reg, "r", 3, "alice")  // takes the 5 000 hold over
        XCTAssertEqual(reg.leave(room: "r", connection: c(2), holdingUntil: 7_000)?.devicesAfter, 2)
        XCTAssertEqual(reg.leave(room: "r", connection: c(3), holdingUntil: 8_000)?.devicesAfter, 2)
        XCTAssertNil(reg.releaseHolds(room: "r", user: "alice", now: 5_000))
        XCTAssertEqual(reg.releaseHolds(room: "r", user: "alice", now: 7_000)?.devicesAfter, 1)
        let last = reg.releaseHolds(room: "r", user: "alice", now: 8_000)
        XCTAssertEqual(last?.userLeftPresence, true)
    }

    func testALeaveWithoutAHoldEndsPresenceAtOnce() {
        var reg = RoomRegistry()
        _ = join(&reg, "r", 1, "alice")
        XCTAssertEqual(reg.leave(room: "r", connection: c(1))?.userLeftPresence, true)
        XCTAssertFalse(reg.isOccupied(room: "r"))
    }

    func testRestatedPresenceCountsHolds() {
        var reg = RoomRegistry()
        _ = join(&reg, "r", 1, "alice")
        _ = reg.leave(room: "r", connection: c(1), holdingUntil: 5_000)
        XCTAssertEqual(reg.allPresence().map { "\($0.room) \($0.user) \($0.devices)" }, ["r alice 1"])
    }

    // MARK: Departures

    func testDeparturesComeDueInOrder() {
        var d = Departures()
        XCTAssertNil(d.nextDeadline)
        d.append(.init(user: "a", rooms: ["r"], until: 100))
        d.append(.init(user: "b", rooms: [], until: 200))
        d.append(.init(user: "c", rooms: ["s"], until: 150))  // out of order: ends with the last
        XCTAssertEqual(d.nextDeadline, 100)
        XCTAssertEqual(d.due(now: 99), [])
        XCTAssertEqual(d.due(now: 150).map(\.user), ["a"])
        XCTAssertEqual(d.due(now: 200).map(\.user), ["b", "c"])
        XCTAssertNil(d.nextDeadline)
        XCTAssertEqual(d.count, 0)
    }

    func testManyDeparturesStayBounded() {
        var d = Departures()
        for i in 0..<10_000 {
            d.append(.init(user: "u\(i)", rooms: [], until: Int64(i)))
            _ = d.due(now: Int64(i) - 10)
        }
        XCTAssertEqual(d.count, 10)
        XCTAssertEqual(d.all().count, 10)
        XCTAssertEqual(d.count, 0)
    }
}
