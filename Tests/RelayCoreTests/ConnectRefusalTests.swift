import RelayTestSupport
import XCTest
@testable import RelayCore

/// A refused CONNECT leaves the Engine.IO session open for another `40`, as the reference
/// server does: the refusal (`44`) is sent once, on the session's transport; the session is
/// back to awaiting a CONNECT with a new deadline and the pre-login limits; the
/// `maxConnectRefusals`th refusal closes it with 4003.
final class ConnectRefusalTests: XCTestCase {
    typealias Action = EngineSession.Action

    let alice = AuthenticatedUser(userID: "alice", rooms: RoomAuthorization(patterns: ["conversation:*"]), expiresAt: .max)
    let preAuth = LimitsInForce(maxMessageBytes: 16_384, preAuthentication: true)
    let expired = "44{\"message\":\"token has expired\",\"data\":{\"code\":\"token_expired\"}}"

    func makeSession(_ transport: EngineSession.Transport = .websocket, refusals: Int = 3) -> EngineSession {
        var c = SessionConfiguration.testing
        c.heartbeat.intervalMs = 25_000
        c.heartbeat.timeoutMs = 20_000
        c.connectTimeoutMs = 10_000
        c.upgradeTimeoutMs = 1_000
        c.maxPayload = 1_000_000
        c.maxConnectPayload = 16_384
        c.maxConnectRefusals = refusals
        var s = EngineSession(configuration: c, transport: transport, engineSID: "E", socketSID: "S", now: 0)
        _ = s.start(now: 0)
        return s
    }

    func receive(_ s: inout EngineSession, _ text: String, from: EngineSession.Transport = .websocket, at now: Int64 = 0) -> [Action] {
        s.receive(Array(text.utf8)[...], from: from, now: now, wallMs: 1_000_000)
    }

    func refuse(_ s: inout EngineSession, at now: Int64) -> [Action] {
        XCTAssertEqual(receive(&s, "40{\"token\":\"bad\"}", at: now), [.authenticate(ConnectRequest(token: "bad"))])
        return s.connectFinished(.failure(RelayError(.tokenExpired)), now: now + 1)
    }

    func testARefusalKeepsTheSessionOpenWithANewDeadline() {
        var s = makeSession()
        XCTAssertEqual(refuse(&s, at: 4_000), [.send(Array(expired.utf8))], "the refusal once, no close")
        XCTAssertEqual(s.lifecycle, .awaitingConnect(deadline: 14_001, left: false, refusals: 1))
        XCTAssertEqual(s.limits, preAuth, "still the pre-login limits")
        XCTAssertNil(s.user)
        XCTAssertEqual(s.nextDeadline, 14_001, "a new CONNECT deadline from the refusal")
        XCTAssertEqual(s.tick(now: 14_000), [])
        XCTAssertEqual(s.tick(now: 14_001), [.close(code: CloseCode.connectTimeout, reason: "connect timeout")])
    }

    func testAnotherConnectOnTheSameSessionIsTaken() {
        var s = makeSession()
        _ = refuse(&s, at: 10)
        XCTAssertEqual(receive(&s, "40{\"token\":\"good\"}", at: 20), [.authenticate(ConnectRequest(token: "good"))])
        let answer = s.connectFinished(.success(ConnectAnswer(user: alice)), now: 21)
        XCTAssertEqual(answer.last, .send(Array("40{\"sid\":\"S\"}".utf8)))
        XCTAssertEqual(s.user, alice)
        XCTAssertEqual(s.nextDeadline, 25_000, "only the heartbeat once connected")
    }

    func testTheLastRefusalOfASessionCloses4003() {
        var s = makeSession(refusals: 3)
        XCTAssertEqual(refuse(&s, at: 1).count, 1)
        XCTAssertEqual(refuse(&s, at: 2).count, 1)
        let third = refuse(&s, at: 3)
        XCTAssertEqual(third, [.send(Array(expired.utf8)), .close(code: CloseCode.authenticationFailed, reason: "token_expired")])
        XCTAssertTrue(s.isClosed)
        var once = makeSession(refusals: 1)
        XCTAssertEqual(refuse(&once, at: 1).last, .close(code: CloseCode.authenticationFailed, reason: "token_expired"), "1: today's first-refusal close")
    }

    func testEveryKindOfRefusalCountsTowardTheCap() {
        // A CONNECT that does not parse, a binary packet before CONNECT, a token refused.
        var s = makeSession(refusals: 3)
        XCTAssertEqual(receive(&s, "40{\"token\":\"t\",\"rooms\":\"a\"}", at: 1).count, 1)
        XCTAssertEqual(receive(&s, "451-[\"x:y\",{\"_placeholder\":true,\"num\":0}]", at: 2).count, 1)
        XCTAssertEqual(refuse(&s, at: 3).last, .close(code: CloseCode.authenticationFailed, reason: "token_expired"))
    }

    func testARefusalAfterDisconnectKeepsTheSessionLeft() {
        var s = makeSession()
        _ = receive(&s, "40{\"token\":\"t\"}", at: 1)
        _ = s.connectFinished(.success(ConnectAnswer(user: alice)), now: 2)
        _ = receive(&s, "41", at: 3)
        _ = refuse(&s, at: 4)
        XCTAssertEqual(s.lifecycle, .awaitingConnect(deadline: 10_005, left: true, refusals: 1))
        XCTAssertTrue(s.clientDisconnected, "never kept for recovery")
    }

    func testASuccessfulConnectStartsTheCountAgainAfterA41() {
        // Refusals count in a row: a session that connected and left with `41` is what it was
        // before its first CONNECT (a fuzz run found the fuzzers' model counting across it).
        var s = makeSession(refusals: 3)
        XCTAssertEqual(refuse(&s, at: 1).count, 1)
        XCTAssertEqual(refuse(&s, at: 2).count, 1)
        _ = receive(&s, "40{\"token\":\"good\"}", at: 3)
        _ = s.connectFinished(.success(ConnectAnswer(user: alice)), now: 4)
        _ = receive(&s, "41", at: 5)
        XCTAssertEqual(refuse(&s, at: 6), [.send(Array(expired.utf8))], "the first refusal since the 41")
        XCTAssertEqual(refuse(&s, at: 7).count, 1)
        XCTAssertEqual(refuse(&s, at: 8).last, .close(code: CloseCode.authenticationFailed, reason: "token_expired"))
    }

    func testAPacketRefusedWhileTheTokenIsVerifiedCloses() {
        // The CONNECT's rooms may already be joined: the registration must not outlive it.
        var s = makeSession()
        _ = receive(&s, "40{\"token\":\"t\"}", at: 1)
        let actions = receive(&s, "4abc", at: 2)
        XCTAssertEqual(actions.last, .close(code: CloseCode.authenticationFailed, reason: "invalid_packet"))
        XCTAssertEqual(s.connectFinished(.success(ConnectAnswer(user: alice)), now: 3), [], "a later answer reaches nobody")
    }

    func testARefusalDuringTheProbeWaitsOnPollingAndTheUpgradeStillCompletes() {
        var s = makeSession(.polling)
        XCTAssertEqual(s.probeOpened(now: 1), [])
        _ = receive(&s, "2probe", from: .websocket, at: 2)
        _ = receive(&s, "40{\"token\":\"bad\"}", from: .polling, at: 3)
        XCTAssertEqual(s.connectFinished(.failure(RelayError(.tokenExpired)), now: 4), [.send(Array(expired.utf8))], "not on the probe too")
        XCTAssertEqual(receive(&s, "5", from: .websocket, at: 5), [.upgraded])
        XCTAssertEqual(s.transport, .websocket)
        XCTAssertEqual(receive(&s, "40{\"token\":\"good\"}", at: 6), [.authenticate(ConnectRequest(token: "good"))])
    }
}
