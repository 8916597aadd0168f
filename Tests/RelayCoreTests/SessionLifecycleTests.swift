import RelayTestSupport
import XCTest
@testable import RelayCore

/// The session's lifecycle as one state machine: every state names its deadline and limits, and
/// the paths the main one never takes (after `41`, on the upgrade probe, frames that complete no
/// message) are under the same limits and budgets.
final class SessionLifecycleTests: XCTestCase {
    typealias Action = EngineSession.Action

    let alice = AuthenticatedUser(userID: "alice", rooms: RoomAuthorization(patterns: ["conversation:*"]), expiresAt: .max)
    let preAuth = LimitsInForce(maxMessageBytes: 16_384, preAuthentication: true)
    let loggedIn = LimitsInForce(maxMessageBytes: 1_000_000, preAuthentication: false)

    func makeSession(_ transport: EngineSession.Transport = .websocket, configure: (inout SessionConfiguration) -> Void = { _ in }) -> EngineSession {
        var c = SessionConfiguration.testing
        c.heartbeat.intervalMs = 25_000
        c.heartbeat.timeoutMs = 20_000
        c.connectTimeoutMs = 10_000
        c.upgradeTimeoutMs = 1_000
        c.maxPayload = 1_000_000
        c.maxConnectPayload = 16_384
        configure(&c)
        var s = EngineSession(configuration: c, transport: transport, engineSID: "E", socketSID: "S", now: 0)
        _ = s.start(now: 0)
        return s
    }

    func receive(_ s: inout EngineSession, _ text: String, from: EngineSession.Transport = .websocket, at now: Int64 = 0) -> [Action] {
        s.receive(Array(text.utf8)[...], from: from, now: now, wallMs: 1_000_000)
    }

    func connect(_ s: inout EngineSession, rooms: Int = 0, from: EngineSession.Transport = .websocket, at now: Int64 = 0) -> [Action] {
        _ = receive(&s, "40{\"token\":\"t\"}", from: from, at: now)
        let joined = (0..<rooms).map { ("conversation:\($0)", "o") }
        return s.connectFinished(.success(ConnectAnswer(user: alice, rooms: joined)), now: now)
    }

    func closes(_ actions: [Action]) -> UInt16? {
        for case .close(let code, _) in actions { return code }
        return nil
    }

    // MARK: States and what holds in them

    func testEveryStateNamesItsDeadlineAndLimits() {
        var s = makeSession()
        XCTAssertEqual(s.lifecycle, .awaitingConnect(deadline: 10_000, left: false, refusals: 0))
        XCTAssertEqual(s.limits, preAuth)
        _ = receive(&s, "40{\"token\":\"t\"}", at: 5)
        XCTAssertEqual(s.lifecycle, .verifying(left: false, refusals: 0))
        XCTAssertEqual(s.limits, preAuth, "still unauthenticated while the token is verified")
        let done = s.connectFinished(.success(ConnectAnswer(user: alice)), now: 6)
        XCTAssertEqual(done.first, .limits(loggedIn), "the transports are told before the answer goes out")
        guard case .connected(let login) = s.lifecycle else { return XCTFail("\(s.lifecycle)") }
        XCTAssertEqual(login.user, alice)
        XCTAssertEqual(s.limits, loggedIn)
        XCTAssertEqual(s.nextDeadline, 25_000, "only the heartbeat once connected")
    }

    func testDisconnectRestoresThePreLoginLimitsAndTheConnectDeadline() {
        var s = makeSession()
        _ = connect(&s, at: 1)
        XCTAssertEqual(receive(&s, "41", at: 100), [.leave, .limits(preAuth)])
        XCTAssertEqual(s.lifecycle, .awaitingConnect(deadline: 10_100, left: true, refusals: 0))
        XCTAssertEqual(s.limits, preAuth)
        XCTAssertNil(s.user, "no identity after 41")
        XCTAssertEqual(s.nextDeadline, 10_100)
        XCTAssertEqual(s.tick(now: 10_099), [])
        XCTAssertEqual(s.tick(now: 10_100), [.close(code: CloseCode.connectTimeout, reason: "connect timeout")])
        XCTAssertTrue(s.clientDisconnected, "a session that left is never kept for recovery, closed or not")
    }

    func testAConnectAfterDisconnectGetsTheFullLoginAgain() {
        var s = makeSession()
        _ = connect(&s, at: 1)
        _ = receive(&s, "41", at: 2)
        XCTAssertEqual(connect(&s, at: 3).first, .limits(loggedIn))
        XCTAssertEqual(s.limits, loggedIn)
        XCTAssertFalse(s.clientDisconnected)
        XCTAssertEqual(s.nextDeadline, 25_000, "no CONNECT deadline once connected again")
    }

    func testAnEventAfterDisconnectIsRefusedNotRun() {
        var s = makeSession()
        _ = connect(&s)
        _ = receive(&s, "41", at: 1)
        let actions = receive(&s, "42[\"message:reaction\",{\"room\":\"conversation:1\"}]", at: 2)
        XCTAssertFalse(actions.contains { if case .handle = $0 { return true } else { return false } })
    }

    func testClosedKeepsNothing() {
        var s = makeSession()
        _ = connect(&s)
        _ = s.close(code: CloseCode.kicked, reason: "kick")
        XCTAssertEqual(s.lifecycle, .closed(left: false))
        XCTAssertNil(s.nextDeadline)
        XCTAssertEqual(s.receiveFrame(size: 1, now: 1), [])
    }

    // MARK: Every frame spends budget

    func testFramesThatCompleteNoMessageSpendThePacketBudget() {
        for authenticated in [false, true] {
            var s = makeSession { $0.budgets.inbound.packets = .init(perSecond: 10, burst: 20) }
            if authenticated { _ = connect(&s) }
            var closedAt: Int?
            for i in 0..<100 where closedAt == nil {
                if closes(s.receiveFrame(size: 0, now: 0)) == CloseCode.policyViolation { closedAt = i }
            }
            XCTAssertEqual(closedAt, 20 - (authenticated ? 1 : 0), "empty continuations are closed 1008 at the burst (authenticated: \(authenticated))")
        }
    }

    func testFrameBytesSpendTheByteBudget() {
        var s = makeSession { $0.budgets.inbound.bytes = .init(perSecond: 1000, burst: 4000) }
        XCTAssertEqual(s.receiveFrame(size: 3000, now: 0), [])
        XCTAssertEqual(closes(s.receiveFrame(size: 1001, now: 0)), CloseCode.policyViolation)
    }

    // MARK: The upgrade probe

    func testProbeFloodSpendsTheSessionsBudget() {
        for packet in ["2probe", "6"] {
            var s = makeSession(.polling) { $0.budgets.inbound.packets = .init(perSecond: 10, burst: 20) }
            XCTAssertEqual(s.probeOpened(now: 0), [])
            XCTAssertEqual(s.upgrade, .probing(deadline: 1_000))
            var closed: UInt16?
            for _ in 0..<1000 where closed == nil { closed = closes(receive(&s, packet, from: .websocket)) }
            XCTAssertEqual(closed, CloseCode.policyViolation, "\(packet) flood on the probe")
            XCTAssertTrue(s.isClosed)
        }
    }

    func testProbeStateCarriesItsDeadline() {
        var s = makeSession(.polling)
        _ = s.probeOpened(now: 50)
        XCTAssertEqual(s.nextDeadline, 1_050)
        XCTAssertEqual(s.tick(now: 1_050), [.abortProbe(reason: "upgrade timeout")])
        XCTAssertEqual(s.upgrade, .polling)
        XCTAssertEqual(s.nextDeadline, 10_000, "the probe's deadline went with the probe")
        XCTAssertEqual(s.probeOpened(now: 2_000), [], "a new probe may start")
    }

    func testUpgradeKeepsTheLimitsOfTheState() {
        var s = makeSession(.polling)
        _ = s.probeOpened(now: 0)
        _ = receive(&s, "2probe", from: .websocket)
        XCTAssertEqual(receive(&s, "5", from: .websocket), [.upgraded])
        XCTAssertEqual(s.transport, .websocket)
        XCTAssertEqual(s.limits, preAuth, "an upgrade before CONNECT lifts nothing")
    }

    // MARK: Joins

    func testRoomsInConnectSpendTheJoinBudget() {
        var s = makeSession {
            $0.budgets.perClass = [.control: .init(perSecond: 20, burst: 50)]
            $0.maxRoomsInConnect = 100
        }
        let rooms = (0..<100).map { "\"conversation:\($0)\"" }.joined(separator: ",")
        let actions = receive(&s, "40{\"token\":\"t\",\"rooms\":[\(rooms)]}")
        guard case .authenticate(let request)? = actions.first else { return XCTFail("\(actions)") }
        XCTAssertEqual(request.rooms.count, 50, "the burst of room:join")
        XCTAssertEqual(request.overBudget.count, 50)
        XCTAssertEqual(request.overBudget.first, "conversation:50")
    }

    /// A `40`/`41` loop naming 100 rooms joins no more rooms in a second than `room:join` and
    /// `room:leave` may: the burst, then the refill (the leaves pay too).
    func testAConnectDisconnectLoopIsHeldToTheJoinRate() {
        var s = makeSession {
            $0.budgets.perClass = [.control: .init(perSecond: 20, burst: 50)]
            $0.budgets.events = .init(perSecond: 1000, burst: 1000)
            $0.budgets.inbound.packets = .init(perSecond: 100_000, burst: 100_000)
        }
        let rooms = (0..<100).map { "\"conversation:\($0)\"" }.joined(separator: ",")
        var joins = 0
        var now: Int64 = 0
        while now < 10_000 {
            let actions = receive(&s, "40{\"token\":\"t\",\"rooms\":[\(rooms)]}", at: now)
            guard case .authenticate(let request)? = actions.first else { return XCTFail("\(actions)") }
            joins += request.rooms.count
            let joined = request.rooms.map { ($0, "o") }
            _ = s.connectFinished(.success(ConnectAnswer(user: alice, rooms: joined)), now: now)
            _ = receive(&s, "41", at: now)
            now += 4  // 250 cycles a second, as measured from outside
        }
        // 10 s at 20 joins/s plus the burst of 50, joins and leaves from one budget.
        XCTAssertLessThanOrEqual(joins, 50 + 20 * 10)
        XCTAssertGreaterThan(joins, 50, "the budget refills")
    }
}
