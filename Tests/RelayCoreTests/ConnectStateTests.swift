import XCTest
@testable import RelayCore

/// A socket's CONNECT as a value: its stages (fresh → setting up with deliveries held →
/// connected), what is released, and the recovery decisions that need no I/O.
final class ConnectStateTests: XCTestCase {
    /// A delivery: an id, and its stream position when it is recoverable.
    struct Delivery: Sendable, Equatable {
        var id: Int
        var stream: StreamKey?
        var offset = StreamOffset.zero
    }

    let alice = AuthenticatedUser(userID: "alice", rooms: RoomAuthorization(patterns: ["conversation:*"]), expiresAt: .max)
    let room = StreamKey.room("conversation:1")
    func o(_ ms: UInt64) -> StreamOffset { StreamOffset(ms: ms, seq: 0) }

    func queue(maxBytes: Int = 1_000, maxCount: Int = 100) -> OutboundQueue<Delivery> {
        OutboundQueue(softLimitBytes: maxBytes, hardLimitBytes: maxBytes, maxCount: maxCount)
    }

    func position(_ d: Delivery) -> (stream: StreamKey, offset: StreamOffset)? {
        d.stream.map { ($0, d.offset) }
    }

    func testAPlainConnectHoldsNothing() {
        var state = ConnectState<Delivery>()
        XCTAssertNil(state.user)
        XCTAssertEqual(state.hold(Delivery(id: 1), bytes: 10), .writeNow, "not registered: nothing to hold")
        state.register(alice, holdingIn: nil)
        XCTAssertEqual(state.user, alice)
        XCTAssertFalse(state.isHolding)
        XCTAssertEqual(state.hold(Delivery(id: 2), bytes: 10), .writeNow)
        XCTAssertEqual(state.release(after: [:], position: position), [], "nothing was held")
    }

    func testDeliveriesWaitWhileSettingUpAndLeaveInOrderWithoutWhatTheSocketHas() {
        var state = ConnectState<Delivery>()
        state.register(alice, holdingIn: queue())
        XCTAssertTrue(state.isHolding)
        XCTAssertEqual(state.user, alice, "registered while it sets up")
        XCTAssertEqual(state.hold(Delivery(id: 1, stream: room, offset: o(5)), bytes: 10), .held)
        XCTAssertEqual(state.hold(Delivery(id: 2), bytes: 10), .held)
        XCTAssertEqual(state.hold(Delivery(id: 3, stream: room, offset: o(7)), bytes: 10), .held)
        XCTAssertEqual(state.heldBytes, 30)
        // The answer said the room stood at 5 (the replay covered it): only what is newer goes.
        let released = state.release(after: [room: o(5)], position: position)
        XCTAssertEqual(released.map(\.id), [2, 3])
        XCTAssertFalse(state.isHolding)
        XCTAssertEqual(state.heldBytes, 0)
        XCTAssertEqual(state.user, alice)
        XCTAssertEqual(state.hold(Delivery(id: 4), bytes: 10), .writeNow, "connected: written as they come")
        XCTAssertEqual(state.release(after: [:], position: position), [], "released once")
    }

    func testHoldingIsBoundedInBytesAndCount() {
        var state = ConnectState<Delivery>()
        state.register(alice, holdingIn: queue(maxBytes: 25, maxCount: 100))
        XCTAssertEqual(state.hold(Delivery(id: 1), bytes: 20), .held)
        XCTAssertEqual(state.hold(Delivery(id: 2), bytes: 10), .overflow)
        var counted = ConnectState<Delivery>()
        counted.register(alice, holdingIn: queue(maxBytes: 1_000, maxCount: 2))
        XCTAssertEqual(counted.hold(Delivery(id: 1), bytes: 1), .held)
        XCTAssertEqual(counted.hold(Delivery(id: 2), bytes: 1), .held)
        XCTAssertEqual(counted.hold(Delivery(id: 3), bytes: 1), .overflow)
        XCTAssertEqual(counted.release(after: [:], position: position).map(\.id), [1, 2], "what fitted is kept")
    }

    func testARefusedRegistrationLeavesItFresh() {
        var state = ConnectState<Delivery>()
        state.register(alice, holdingIn: queue())
        state.registrationRefused()
        XCTAssertNil(state.user)
        XCTAssertFalse(state.isHolding)
        XCTAssertEqual(state.hold(Delivery(id: 1), bytes: 1), .writeNow)
    }

    func testARefreshedTokenIsTheUserInEveryStage() {
        let refreshed = AuthenticatedUser(userID: "alice", rooms: RoomAuthorization(patterns: ["conversation:2"]), expiresAt: 99)
        var state = ConnectState<Delivery>()
        state.refreshed(refreshed)
        XCTAssertNil(state.user, "not registered: nothing to refresh")
        state.register(alice, holdingIn: queue())
        _ = state.hold(Delivery(id: 1), bytes: 1)
        state.refreshed(refreshed)
        XCTAssertEqual(state.user, refreshed)
        XCTAssertEqual(state.release(after: [:], position: position).map(\.id), [1], "what was held stays held")
        state.refreshed(alice)
        XCTAssertEqual(state.user, alice)
    }

    func testOffsetsAreTrackedOnlyForSocketsThatTakeThem() {
        var plain = ConnectState<Delivery>()
        plain.follow(room, from: o(3))
        plain.join(.room("conversation:2"), at: o(3))
        XCTAssertTrue(plain.log.streams.isEmpty)
        var taking = ConnectState<Delivery>()
        taking.begin(takesOffsets: true)
        taking.follow(room, from: o(3))
        XCTAssertFalse(taking.record(room, o(3)), "the socket has it")
        XCTAssertTrue(taking.record(room, o(4)))
        taking.unfollow(room)
        XCTAssertTrue(taking.log.streams.isEmpty)
    }

    func testAHandOverNeedsThePidTheUserAndAnAnsweredConnectOldEnough() {
        var state = ConnectState<Delivery>()
        state.begin(takesOffsets: true)
        state.register(alice, holdingIn: nil)
        state.assign(pid: "p")
        XCTAssertFalse(state.mayHandOver(pid: "p", userID: "alice", nowMs: 5_000, afterMs: 1_000), "not answered yet")
        state.answered(atMs: 1_000)
        XCTAssertFalse(state.mayHandOver(pid: "p", userID: "alice", nowMs: 1_999, afterMs: 1_000), "too young")
        XCTAssertTrue(state.mayHandOver(pid: "p", userID: "alice", nowMs: 2_000, afterMs: 1_000))
        XCTAssertFalse(state.mayHandOver(pid: "q", userID: "alice", nowMs: 2_000, afterMs: 1_000), "another pid")
        XCTAssertFalse(state.mayHandOver(pid: "p", userID: "bob", nowMs: 2_000, afterMs: 1_000), "another user")
    }

    func testTheKeptRecordIsTheSocketsPositionAndOnlyForEndsThatKeepIt() throws {
        var state = ConnectState<Delivery>()
        state.begin(takesOffsets: true)
        state.register(alice, holdingIn: nil)
        state.assign(pid: "p")
        state.follow(.user("alice"), from: .zero)
        state.follow(.room("conversation:2"), from: o(1))
        state.follow(room, from: o(2))
        let record = try XCTUnwrap(state.keptRecord(socketSID: "s", end: .transportClosed, clientDisconnected: false, wallMs: 7))
        XCTAssertEqual(record.pid, "p")
        XCTAssertEqual(record.socketSID, "s")
        XCTAssertEqual(record.userID, "alice")
        XCTAssertEqual(record.rooms, ["conversation:1", "conversation:2"], "its rooms, sorted")
        XCTAssertEqual(record.log, state.log)
        XCTAssertEqual(record.disconnectedAtMs, 7)
        XCTAssertNil(state.keptRecord(socketSID: "s", end: .kicked, clientDisconnected: false, wallMs: 7))
        XCTAssertNil(state.keptRecord(socketSID: "s", end: .clientClosed, clientDisconnected: true, wallMs: 7), "it left with 41")
        var plain = ConnectState<Delivery>()
        plain.register(alice, holdingIn: nil)
        XCTAssertNil(plain.keptRecord(socketSID: "s", end: .transportClosed, clientDisconnected: false, wallMs: 7), "no offsets, no pid")
    }

    // MARK: RecoveryPlan

    func kept(rooms: [String], received: [(StreamKey, StreamOffset)] = []) -> KeptSession {
        var log = RecoveryLog()
        log.follow(.user("alice"), from: .zero)
        for room in rooms { log.follow(.room(room), from: o(1)) }
        for (stream, offset) in received { log.record(stream, offset) }
        return KeptSession(pid: "p", socketSID: "s", userID: "alice", rooms: rooms, log: log, disconnectedAtMs: 0)
    }

    func testARecoveryReadsEveryStreamTheNewTokenAllowsAfterItsCut() {
        let record = kept(rooms: ["conversation:1", "secret:1"], received: [(room, o(4))])
        let request = ConnectRequest(token: "t", wantsRecovery: true, pid: "p", offset: WireOffset(o(4), stream: room))
        XCTAssertEqual(
            RecoveryPlan(recovering: record, as: alice, request: request),
            .readMissed(rooms: ["conversation:1"], after: [.user("alice"): .zero, room: o(4)]), "secret:1 is no longer allowed")
        let nothingReceived = ConnectRequest(token: "t", wantsRecovery: true, pid: "p")
        XCTAssertEqual(
            RecoveryPlan(recovering: kept(rooms: ["conversation:1"]), as: alice, request: nothingReceived),
            .readMissed(rooms: ["conversation:1"], after: [.user("alice"): .zero, room: o(1)]))
    }

    func testARecoveryThatCannotBePlacedStartsFresh() {
        let record = kept(rooms: ["conversation:1"], received: [(room, o(4))])
        let bob = AuthenticatedUser(userID: "bob", rooms: alice.rooms, expiresAt: .max)
        XCTAssertEqual(RecoveryPlan(recovering: record, as: bob, request: ConnectRequest(token: "t")), .startFresh(.userMismatch))
        var invalid = ConnectRequest(token: "t", wantsRecovery: true, pid: "p")
        invalid.offsetIsInvalid = true
        XCTAssertEqual(RecoveryPlan(recovering: record, as: alice, request: invalid), .startFresh(.invalidOffset))
        let unknown = ConnectRequest(token: "t", wantsRecovery: true, pid: "p", offset: WireOffset(o(9), stream: room))
        XCTAssertEqual(RecoveryPlan(recovering: record, as: alice, request: unknown), .startFresh(.historyGone), "never sent to it")
    }
}
