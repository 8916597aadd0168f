import RelayTestSupport
import XCTest
@testable import RelayCore

/// The edges stock clients hit on their default settings, as the session state machine sees
/// them: a CONNECT that comes by polling after the upgrade's `5` (socket.io-client-swift), a
/// CONNECT refused while the WebSocket is probed, `41`, malformed packets.
final class StockClientEdgesTests: XCTestCase {
    typealias Action = EngineSession.Action

    let alice = AuthenticatedUser(userID: "alice", rooms: RoomAuthorization(patterns: ["conversation:*"]), expiresAt: .max)

    func makeSession(_ transport: EngineSession.Transport = .polling) -> EngineSession {
        var c = SessionConfiguration.testing
        c.heartbeat.intervalMs = 25_000
        c.heartbeat.timeoutMs = 20_000
        c.connectTimeoutMs = 10_000
        c.upgradeTimeoutMs = 1_000
        var s = EngineSession(configuration: c, transport: transport, engineSID: "E", socketSID: "S", now: 0)
        _ = s.start(now: 0)
        return s
    }

    func receive(_ s: inout EngineSession, _ text: String, from: EngineSession.Transport, at now: Int64 = 0) -> [Action] {
        s.receive(Array(text.utf8)[...], from: from, now: now, wallMs: 1_000_000)
    }

    func texts(_ actions: [Action]) -> [String] {
        actions.compactMap { if case .send(let b) = $0 { return String(decoding: b, as: UTF8.self) } else { return nil } }
    }

    func probeTexts(_ actions: [Action]) -> [String] {
        actions.compactMap { if case .sendProbe(let b) = $0 { return String(decoding: b, as: UTF8.self) } else { return nil } }
    }

    /// Polling session upgraded to WebSocket at `at`, no CONNECT sent yet.
    func upgraded(at now: Int64 = 10) -> EngineSession {
        var s = makeSession()
        XCTAssertEqual(s.probeOpened(now: now), [])
        XCTAssertEqual(receive(&s, "2probe", from: .websocket, at: now), [.sendProbe(Array("3probe".utf8)), .releasePoll])
        XCTAssertEqual(receive(&s, "5", from: .websocket, at: now), [.upgraded])
        return s
    }

    // MARK: The upgrade race

    func testAConnectPostedBeforeTheUpgradeIsTakenAfterIt() {
        var s = upgraded()
        XCTAssertTrue(s.acceptsPolling(now: 500))
        let actions = receive(&s, "40{\"token\":\"t\"}", from: .polling, at: 500)
        XCTAssertEqual(actions, [.authenticate(ConnectRequest(token: "t"))], "the late CONNECT is the session's")
        let answer = texts(s.connectFinished(.success(ConnectAnswer(user: alice)), now: 501))
        XCTAssertEqual(answer, ["40{\"sid\":\"S\"}"], "answered on the session's transport, now the WebSocket")
    }

    func testAfterTheWindowPollingIsNoLongerTheSessions() {
        var s = upgraded(at: 10)
        XCTAssertTrue(s.acceptsPolling(now: 1_009))
        XCTAssertFalse(s.acceptsPolling(now: 1_010))
        XCTAssertEqual(receive(&s, "40{\"token\":\"t\"}", from: .polling, at: 1_010), [])
        XCTAssertEqual(s.phase, .awaitingConnect)
        var never = makeSession(.websocket)
        XCTAssertFalse(never.acceptsPolling(now: 0), "a WebSocket session never took polling")
        XCTAssertEqual(receive(&never, "40", from: .polling), [])
    }

    func testWebSocketPacketsWaitForTheLateConnectAndKeepTheClientsOrder() {
        var s = upgraded(at: 10)
        // Sent on the WebSocket after the `5`, before the CONNECT's POST arrived: held.
        XCTAssertEqual(receive(&s, "42[\"typing:start\",{\"room\":\"conversation:1\"}]", from: .websocket, at: 20), [])
        XCTAssertEqual(s.nextDeadline, 1_010, "held at most until the window ends")
        // Engine.IO packets are not held.
        XCTAssertEqual(texts(receive(&s, "2x", from: .websocket, at: 21)), ["3x"])
        let actions = receive(&s, "40{\"token\":\"t\"}", from: .polling, at: 30)
        XCTAssertEqual(actions.first, .authenticate(ConnectRequest(token: "t")), "the CONNECT first, as the client sent it")
        let after = texts(Array(actions.dropFirst()))
        XCTAssertEqual(after.count, 1, "then the held event, refused as it would be in that order on one transport")
        XCTAssertTrue(after.first?.contains("not_connected") == true, "\(after)")
        XCTAssertEqual(s.nextDeadline, 25_000, "nothing held, and the CONNECT is being verified: only the heartbeat")
    }

    func testHeldPacketsAreTakenWhenNoConnectComes() {
        var s = upgraded(at: 10)
        XCTAssertEqual(receive(&s, "42[\"x:y\",{}]", from: .websocket, at: 20), [])
        XCTAssertEqual(s.tick(now: 1_009), [])
        let late = texts(s.tick(now: 1_010))
        XCTAssertEqual(late.count, 1)
        XCTAssertTrue(late[0].contains("not_connected"), late[0])
        XCTAssertEqual(s.nextDeadline, 10_000, "nothing is held any more")
    }

    func testAConnectOnTheWebSocketIsNotHeldAndReleasesTheRest() {
        var s = upgraded(at: 10)
        XCTAssertEqual(receive(&s, "42[\"x:y\",{}]", from: .websocket, at: 20), [])
        let actions = receive(&s, "40{\"token\":\"t\"}", from: .websocket, at: 21)
        XCTAssertEqual(actions.first, .authenticate(ConnectRequest(token: "t")))
        XCTAssertEqual(actions.count, 2)
    }

    func testHoldingIsBounded() {
        var s = upgraded(at: 10)
        for i in 0..<UpgradeHandover.maxHeldPackets {
            XCTAssertEqual(receive(&s, "42[\"x:y\",{\"n\":\(i)}]", from: .websocket, at: 20), [])
        }
        let overflow = texts(receive(&s, "42[\"x:y\",{}]", from: .websocket, at: 20))
        XCTAssertEqual(overflow.count, 1, "past the bound a packet is taken at once")
        var big = upgraded(at: 10)
        let pad = String(repeating: "p", count: UpgradeHandover.maxHeldBytes)
        XCTAssertEqual(texts(receive(&big, "42[\"x:y\",{\"p\":\"\(pad)\"}]", from: .websocket, at: 20)).count, 1)
    }

    // MARK: A refusal during the probe

    func testARefusedConnectDuringTheProbeGoesOnceOnTheSessionsTransport() {
        var s = makeSession()
        XCTAssertEqual(receive(&s, "40{\"token\":\"bad\"}", from: .polling), [.authenticate(ConnectRequest(token: "bad"))])
        XCTAssertEqual(s.probeOpened(now: 1), [])
        _ = receive(&s, "2probe", from: .websocket, at: 2)
        let refused = s.connectFinished(.failure(RelayError(.tokenExpired)), now: 3)
        let refusal = "44{\"message\":\"\(RelayError(.tokenExpired).message)\",\"data\":{\"code\":\"token_expired\"}}"
        // Once: on polling, where a GET takes it, or the upgrade moves it onto the WebSocket
        // (`ClientSession.upgrade` hands the unsent packets over). The session stays open, so
        // the upgrade may still complete.
        XCTAssertEqual(refused, [.send(Array(refusal.utf8))])
        XCTAssertEqual(probeTexts(refused), [])
        XCTAssertEqual(s.phase, .awaitingConnect)
        XCTAssertEqual(receive(&s, "5", from: .websocket, at: 4), [.upgraded])
    }

    // MARK: 41

    func testDisconnectLeavesTheEngineSessionOpenAndAllowsANewConnect() {
        var s = makeSession(.websocket)
        _ = receive(&s, "40{\"token\":\"t\"}", from: .websocket)
        _ = s.connectFinished(.success(ConnectAnswer(user: alice)), now: 1)
        XCTAssertEqual(receive(&s, "41", from: .websocket, at: 2), [.leave, .limits(LimitsInForce(maxMessageBytes: 16_384, preAuthentication: true))])
        XCTAssertEqual(s.phase, .awaitingConnect)
        XCTAssertTrue(s.clientDisconnected)
        XCTAssertEqual(s.nextDeadline, 10_002, "the CONNECT deadline holds again after a DISCONNECT")
        XCTAssertTrue(texts(receive(&s, "42[\"x:y\",{}]", from: .websocket, at: 5_000))[0].contains("not_connected"))
        XCTAssertEqual(receive(&s, "41", from: .websocket, at: 5_001), [], "a second DISCONNECT changes nothing")
        s.renewSocketSID("T")
        XCTAssertEqual(receive(&s, "40{\"token\":\"u\"}", from: .websocket, at: 5_002), [.authenticate(ConnectRequest(token: "u"))])
        s.renewSocketSID("U")  // not while a CONNECT is under way
        XCTAssertEqual(texts(s.connectFinished(.success(ConnectAnswer(user: alice)), now: 5_003)), ["40{\"sid\":\"T\"}"], "a new socket, a new sid")
        XCTAssertEqual(texts(s.tick(now: 25_000)), ["2"], "the heartbeat went on throughout")
        XCTAssertFalse(s.clientDisconnected, "connected again: kept for recovery as usual")
    }

    func testDisconnectWhileTheTokenIsVerifiedEndsTheSession() {
        var s = makeSession(.websocket)
        _ = receive(&s, "40{\"token\":\"t\"}", from: .websocket)
        XCTAssertEqual(receive(&s, "41", from: .websocket), [.close(code: CloseCode.normal, reason: "client disconnected")])
        XCTAssertEqual(s.connectFinished(.success(ConnectAnswer(user: alice)), now: 1), [])
    }

    // MARK: Malformed packets

    func testMalformedPacketsCloseTheConnection() {
        let closed: [Action] = [.close(code: CloseCode.protocolError, reason: "invalid Socket.IO packet")]
        for packet in ["4abc", "42{}", "42abc[\"message-with-ack\",1]", "42[]", "42[1,{}]", "42\"x\"", "43x", "451-[\"x:y\",{\"_placeholder\":true,\"num\":3}]"] {
            var s = makeSession(.websocket)
            _ = receive(&s, "40{\"token\":\"t\"}", from: .websocket)
            _ = s.connectFinished(.success(ConnectAnswer(user: alice)), now: 1)
            XCTAssertEqual(receive(&s, packet, from: .websocket, at: 2), closed, packet)
        }
    }

    func testBeforeConnectAMalformedPacketRefusesTheConnect() {
        var s = makeSession(.websocket)
        let actions = receive(&s, "4abc", from: .websocket)
        XCTAssertEqual(texts(actions).count, 1)
        XCTAssertTrue(texts(actions).first?.hasPrefix("44{") == true, "\(actions)")
        XCTAssertEqual(s.phase, .awaitingConnect, "refused, and open for a CONNECT")
    }

    func testRelaysOwnRulesStayErrorReplies() {
        var s = makeSession(.websocket)
        _ = receive(&s, "40{\"token\":\"t\"}", from: .websocket)
        _ = s.connectFinished(.success(ConnectAnswer(user: alice)), now: 1)
        // Duplicate keys are valid JSON Relay refuses; unknown events and bad payloads are
        // Relay's validation: an error reply, the connection stays.
        for packet in ["421[\"x:y\",{\"a\":1,\"a\":2}]", "422[\"nope\",{}]", "423[\"typing:start\",{\"room\":5}]"] {
            let reply = texts(receive(&s, packet, from: .websocket, at: 2))
            XCTAssertTrue(reply.first?.hasPrefix("43") == true, "\(packet): \(reply)")
        }
        XCTAssertFalse(s.isClosed)
    }

    // MARK: Polling after an end

    func testWhichEndsAreOwedToTheNextPoll() {
        for code in [CloseCode.authenticationFailed, CloseCode.kicked, CloseCode.tokenExpired, CloseCode.goingAway, CloseCode.connectTimeout] {
            XCTAssertTrue(CloseCode.isOwedToPoller(code), "\(code)")
        }
        for code in [CloseCode.normal, CloseCode.pingTimeout, CloseCode.protocolError, CloseCode.policyViolation, CloseCode.messageTooBig] {
            XCTAssertFalse(CloseCode.isOwedToPoller(code), "\(code)")
        }
        XCTAssertTrue(CloseCode.isRequestFault(CloseCode.protocolError))
        XCTAssertFalse(CloseCode.isRequestFault(CloseCode.normal))
    }
}
