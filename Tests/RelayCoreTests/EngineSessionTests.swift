import RelayTestSupport
import XCTest
@testable import RelayCore

/// The session state machine, fed packets and time, without a socket.
final class EngineSessionTests: XCTestCase {
    typealias Action = EngineSession.Action

    let alice = AuthenticatedUser(userID: "alice", rooms: RoomAuthorization(patterns: ["conversation:*"]), expiresAt: .max)

    func makeSession(_ transport: EngineSession.Transport = .websocket, configure: (inout SessionConfiguration) -> Void = { _ in }) -> EngineSession {
        var c = SessionConfiguration.testing
        c.heartbeat.intervalMs = 1000
        c.heartbeat.timeoutMs = 500
        c.connectTimeoutMs = 300
        c.upgradeTimeoutMs = 200
        configure(&c)
        return EngineSession(configuration: c, transport: transport, engineSID: "E", socketSID: "S", fallbackToken: "from-query", now: 0)
    }

    func texts(_ actions: [Action]) -> [String] {
        actions.compactMap { if case .send(let b) = $0 { return String(decoding: b, as: UTF8.self) } else { return nil } }
    }

    func receive(_ s: inout EngineSession, _ text: String, from: EngineSession.Transport = .websocket, at now: Int64 = 0) -> [Action] {
        s.receive(Array(text.utf8)[...], from: from, now: now, wallMs: 1_000_000)
    }

    func connected(_ transport: EngineSession.Transport = .websocket, configure: (inout SessionConfiguration) -> Void = { _ in }) -> EngineSession {
        var s = makeSession(transport, configure: configure)
        _ = s.start(now: 0)
        _ = receive(&s, "40{\"token\":\"t\"}", from: transport)
        _ = s.connectFinished(.success(ConnectAnswer(user: alice)), now: 0)
        return s
    }

    func testOpenPacketAnnouncesUpgradesOnlyOnPolling() throws {
        var ws = makeSession(.websocket)
        let open = texts(ws.start(now: 0))
        XCTAssertEqual(open.count, 1)
        XCTAssertTrue(open[0].hasPrefix("0{\"sid\":\"E\",\"upgrades\":[],\"pingInterval\":1000,\"pingTimeout\":500"), open[0])
        var polling = makeSession(.polling)
        XCTAssertTrue(texts(polling.start(now: 0))[0].contains("\"upgrades\":[\"websocket\"]"))
    }

    func testHeartbeat() {
        var s = connected()
        XCTAssertEqual(s.nextDeadline, 1000)
        XCTAssertEqual(texts(s.tick(now: 999)), [])
        XCTAssertEqual(texts(s.tick(now: 1000)), ["2"])
        XCTAssertEqual(s.nextDeadline, 1500)
        XCTAssertEqual(receive(&s, "3", at: 1200), [])
        XCTAssertEqual(s.nextDeadline, 2200, "the next ping comes an interval after the pong")
        XCTAssertEqual(texts(s.tick(now: 2200)), ["2"])
        XCTAssertEqual(s.tick(now: 2700), [.close(code: CloseCode.pingTimeout, reason: "ping timeout")])
        XCTAssertTrue(s.isClosed)
        XCTAssertEqual(s.tick(now: 9999), [])
        XCTAssertEqual(receive(&s, "3"), [])
    }

    func testAnUnaskedPongChangesNothing() {
        var s = connected()
        XCTAssertEqual(receive(&s, "3", at: 10), [])
        XCTAssertEqual(s.nextDeadline, 1000)
    }

    func testConnectTimeout() {
        var s = makeSession()
        _ = s.start(now: 0)
        XCTAssertEqual(s.tick(now: 299), [])
        XCTAssertEqual(s.tick(now: 300), [.close(code: CloseCode.connectTimeout, reason: "connect timeout")])
    }

    func testConnectUsesTheAuthTokenThenTheFallback() {
        var s = makeSession()
        _ = s.start(now: 0)
        XCTAssertEqual(receive(&s, "40{\"token\":\"abc\"}"), [.authenticate(ConnectRequest(token: "abc"))])
        XCTAssertEqual(s.phase, .authenticating)
        XCTAssertEqual(receive(&s, "40{\"token\":\"again\"}"), [], "a CONNECT while authenticating is ignored")
        var q = makeSession()
        _ = q.start(now: 0)
        XCTAssertEqual(receive(&q, "40"), [.authenticate(ConnectRequest(token: "from-query"))])
    }

    func testConnectAnswerAndRefusal() {
        var s = makeSession()
        _ = s.start(now: 0)
        _ = receive(&s, "40{\"token\":\"t\"}")
        XCTAssertEqual(texts(s.connectFinished(.success(ConnectAnswer(user: alice)), now: 5)), ["40{\"sid\":\"S\"}"])
        XCTAssertEqual(s.user, alice)
        XCTAssertEqual(s.tick(now: 400), [], "no connect timeout once connected")
        var r = makeSession()
        _ = r.start(now: 0)
        _ = receive(&r, "40{\"token\":\"t\"}")
        let refused = r.connectFinished(.failure(RelayError(.tokenExpired)), now: 5)
        XCTAssertEqual(refused, [.send(Array("44{\"message\":\"token has expired\",\"data\":{\"code\":\"token_expired\"}}".utf8))])
        XCTAssertEqual(r.phase, .awaitingConnect, "the session stays open for another CONNECT")
    }

    func testOtherNamespacesAreRefusedWithoutClosing() {
        var s = makeSession()
        _ = s.start(now: 0)
        XCTAssertEqual(texts(receive(&s, "40/admin,{}")), ["44/admin,{\"message\":\"Invalid namespace\"}"])
        XCTAssertEqual(texts(receive(&s, "40/random")), ["44/random,{\"message\":\"Invalid namespace\"}"], "no comma, as the protocol suite sends it")
        XCTAssertFalse(s.isClosed)
    }

    func testEventsBecomeTypedActions() {
        var s = connected()
        let actions = receive(&s, "421[\"room:join\",{\"room\":\"conversation:1\"}]")
        XCTAssertEqual(actions, [.received(event: "room:join"), .handle(.join(room: "conversation:1"), ackID: 1, user: alice)])
        let update = receive(&s, "42[\"location:update\",{\"room\":\"conversation:1\",\"lat\":1,\"lng\":2}]")
        guard case .handle(.locationUpdate(let b), nil, _)? = update.last else { return XCTFail("\(update)") }
        XCTAssertEqual(b.coalescingKey, CoalescingKey(event: "location:update", room: "conversation:1", user: "alice"))
        let receipt = receive(&s, "422[\"message:read\",{\"room\":\"conversation:1\",\"messageId\":\"m\",\"authorId\":\"bob\"}]")
        XCTAssertEqual(receipt.last, .handle(.receipt(NewReceipt(room: "conversation:1", messageID: "m", authorID: "bob", userID: "alice", kind: .read, ts: 1_000_000)), ackID: 2, user: alice))
    }

    func testInvalidEventsGetOneErrorReply() {
        var s = connected()
        XCTAssertEqual(texts(receive(&s, "427[\"Bad_Name\",{}]")), ["437[{\"ok\":false,\"error\":{\"code\":\"invalid_event_name\",\"message\":\"invalid event name: Bad_Name\"}}]"])
        let noAck = texts(receive(&s, "42[\"room:join\",{}]"))
        XCTAssertEqual(noAck.count, 1)
        XCTAssertTrue(noAck[0].hasPrefix("42[\"error\",{\"code\":\"invalid_payload\""), noAck[0])
        XCTAssertTrue(noAck[0].contains("\"event\":\"room:join\""))
        XCTAssertTrue(texts(receive(&s, "423[\"x:y\",{\"room\":\"a\",\"room\":\"b\"}]"))[0].hasPrefix("433[{\"ok\":false,\"error\":{\"code\":\"invalid_payload\""))
    }

    func testEventsBeforeConnect() {
        var s = makeSession()
        _ = s.start(now: 0)
        XCTAssertEqual(texts(receive(&s, "421[\"room:join\",{\"room\":\"conversation:1\"}]")), ["431[{\"ok\":false,\"error\":{\"code\":\"not_connected\",\"message\":\"send CONNECT (40) first\"}}]"])
    }

    func testRateLimitAndErrorBudget() {
        var s = connected {
            $0.budgets.events = .init(perSecond: 1, burst: 2)
            $0.budgets.errorReplies = .init(perSecond: 1, burst: 2)
        }
        _ = receive(&s, "42[\"presence:list\",{\"room\":\"conversation:1\"}]")
        _ = receive(&s, "42[\"presence:list\",{\"room\":\"conversation:1\"}]")
        let third = receive(&s, "423[\"presence:list\",{\"room\":\"conversation:1\"}]")
        XCTAssertTrue(third.contains(.rateLimited(.control)))
        XCTAssertTrue(texts(third)[0].hasPrefix("433[{\"ok\":false,\"error\":{\"code\":\"rate_limited\""))
        _ = receive(&s, "424[\"presence:list\",{\"room\":\"conversation:1\"}]")
        // The error budget (burst 2) is spent: the next refusal closes with 1008.
        let closing = receive(&s, "425[\"presence:list\",{\"room\":\"conversation:1\"}]")
        XCTAssertEqual(closing.last, .close(code: CloseCode.policyViolation, reason: "too many refused events"))
        XCTAssertTrue(texts(closing).isEmpty)
    }

    func testEventSizeLimit() {
        var s = connected { $0.maxEventBytes = 64 }
        let reply = texts(receive(&s, "421[\"x:y\",{\"room\":\"r\",\"pad\":\"" + String(repeating: "p", count: 80) + "\"}]"))
        XCTAssertTrue(reply[0].contains("payload_too_large"), reply[0])
    }

    func testClosePackets() {
        var s = connected()
        XCTAssertEqual(
            receive(&s, "41"), [.leave, .limits(LimitsInForce(maxMessageBytes: 16_384, preAuthentication: true))],
            "DISCONNECT leaves and the pre-login limits hold again; the Engine.IO session stays")
        XCTAssertFalse(s.isClosed)
        var t = connected()
        XCTAssertEqual(receive(&t, "1"), [.close(code: CloseCode.normal, reason: "client closed")])
        var u = connected()
        XCTAssertEqual(receive(&u, "9"), [.close(code: CloseCode.protocolError, reason: "invalid Engine.IO packet")])
        var v = connected()
        XCTAssertEqual(texts(v.goAway()), ["1"])
        XCTAssertTrue(v.isClosed)
    }

    func testUpgradeFromPolling() {
        var s = connected(.polling)
        XCTAssertEqual(s.probeOpened(now: 10), [])
        XCTAssertTrue(s.upgrading)
        XCTAssertEqual(receive(&s, "2probe", from: .websocket, at: 20), [.sendProbe(Array("3probe".utf8)), .releasePoll])
        // Polling still carries the session until the upgrade packet.
        XCTAssertEqual(receive(&s, "421[\"room:join\",{\"room\":\"conversation:1\"}]", from: .polling).last, .handle(.join(room: "conversation:1"), ackID: 1, user: alice))
        XCTAssertEqual(receive(&s, "5", from: .websocket, at: 30), [.upgraded])
        XCTAssertEqual(s.transport, .websocket)
        XCTAssertFalse(s.upgrading)
        XCTAssertEqual(receive(&s, "42[\"typing:start\",{\"room\":\"conversation:1\"}]", from: .websocket).last, .handle(.typing(room: "conversation:1", isTyping: true), ackID: nil, user: alice))
    }

    func testUpgradeTimeoutAndBadProbes() {
        var s = connected(.polling)
        _ = s.probeOpened(now: 0)
        XCTAssertEqual(s.tick(now: 200), [.abortProbe(reason: "upgrade timeout")])
        XCTAssertEqual(s.transport, .polling)
        XCTAssertEqual(s.probeOpened(now: 300), [], "a new probe may try again")
        XCTAssertEqual(s.probeOpened(now: 301), [.abortProbe(reason: "no upgrade possible")], "one probe at a time")
        XCTAssertEqual(receive(&s, "42[\"x:y\",{}]", from: .websocket), [.abortProbe(reason: "unexpected packet on the probe")])
        var ws = connected(.websocket)
        XCTAssertEqual(ws.probeOpened(now: 0), [.abortProbe(reason: "no upgrade possible")])
    }

    func testBinaryEventsOverWebSocketAndPolling() {
        let header = "451-[\"file:shared\",{\"room\":\"conversation:1\",\"file\":{\"_placeholder\":true,\"num\":0}}]"
        var ws = connected(.websocket)
        XCTAssertEqual(receive(&ws, header), [], "waits for its attachment")
        let actions = ws.receiveBinary([1, 2, 3], from: .websocket, now: 0, wallMs: 5)
        guard case .handle(.custom(let b), nil, _)? = actions.last else { return XCTFail("\(actions)") }
        XCTAssertEqual(b.name, "file:shared")
        XCTAssertEqual(b.attachments, [[1, 2, 3]])
        XCTAssertEqual(b.payload["file"], BinaryPlaceholder.json(0))

        var polling = connected(.polling)
        XCTAssertEqual(receive(&polling, header, from: .polling), [])
        let viaPolling = receive(&polling, "bAQID", from: .polling)
        guard case .handle(.custom(let p), nil, _)? = viaPolling.last else { return XCTFail("\(viaPolling)") }
        XCTAssertEqual(p.attachments, [[1, 2, 3]])
    }

    func testBinaryIsRefusedOutsideCustomEventsAndWithoutAHeader() {
        var s = connected()
        _ = receive(&s, "451-7[\"message:reaction\",{\"room\":\"conversation:1\",\"x\":{\"_placeholder\":true,\"num\":0}}]")
        let refused = texts(s.receiveBinary([9], from: .websocket, now: 0, wallMs: 0))
        XCTAssertTrue(refused.first?.hasPrefix("437[{\"ok\":false,\"error\":{\"code\":\"invalid_payload\"") == true, "\(refused)")
        // A binary message no packet announced does not parse: the connection closes (1002).
        XCTAssertEqual(s.receiveBinary([1], from: .websocket, now: 0, wallMs: 0), [.close(code: CloseCode.protocolError, reason: "invalid Socket.IO packet")])
        // So does a text packet while attachments are still expected.
        var t = connected()
        _ = receive(&t, "452-9[\"x:y\",{\"room\":\"conversation:1\",\"a\":{\"_placeholder\":true,\"num\":0},\"b\":{\"_placeholder\":true,\"num\":1}}]")
        let mixed = receive(&t, "42[\"typing:start\",{\"room\":\"conversation:1\"}]")
        XCTAssertEqual(mixed, [.close(code: CloseCode.protocolError, reason: "invalid Socket.IO packet")])
    }

    func testEveryReplyGoesThroughTheSession() {
        var s = connected()
        XCTAssertEqual(texts(s.reply(.ack(id: 3, payload: .object([("ok", true)])), now: 0)), ["433[{\"ok\":true}]"])
        let binary = s.reply(.binaryAck(id: 4, payload: .object([("ok", true), ("b", BinaryPlaceholder.json(0))]), attachments: [[1, 2]]), now: 0)
        guard case .sendBinary(let header, let attachments)? = binary.first, binary.count == 1 else { return XCTFail("\(binary)") }
        XCTAssertTrue(String(decoding: header, as: UTF8.self).hasPrefix("461-4[{\"ok\":true"), String(decoding: header, as: UTF8.self))
        XCTAssertEqual(attachments, [[1, 2]])
        let failure = texts(s.reply(.failure(RelayError(.notInRoom), event: "typing:start", ackID: 5), now: 0))
        XCTAssertTrue(failure.first?.hasPrefix("435[{\"ok\":false,\"error\":{\"code\":\"not_in_room\"") == true, "\(failure)")
        _ = s.close(code: CloseCode.kicked, reason: "kicked")
        XCTAssertEqual(s.reply(.ack(id: 6, payload: .object([("ok", true)])), now: 0), [], "nothing once closed")
        XCTAssertEqual(s.reply(.binaryAck(id: 7, payload: .object([]), attachments: [[1]]), now: 0), [])
        XCTAssertEqual(s.reply(.failure(RelayError(.notInRoom), event: nil, ackID: 8), now: 0), [])
    }
}

final class EngineSessionConnectRequestTests: XCTestCase {
    func testConnectCarriesTheRecoveryRequestAndAnswersWithPidAndRooms() {
        var s = EngineSession(configuration: SessionConfiguration.testing, transport: .websocket, engineSID: "E", socketSID: "S", now: 0)
        _ = s.start(now: 0)
        let actions = s.receive(ArraySlice("40{\"token\":\"t\",\"pid\":\"P\",\"offset\":\"1-0:0000000a\",\"rooms\":[\"a\"]}".utf8), from: .websocket, now: 1, wallMs: 1)
        XCTAssertEqual(actions, [.authenticate(ConnectRequest(token: "t", wantsRecovery: true, pid: "P", offset: WireOffset("1-0:0000000a"), rooms: ["a"]))])
        let alice = AuthenticatedUser(userID: "alice", rooms: RoomAuthorization(patterns: ["*"]), expiresAt: .max)
        let answer = ConnectAnswer(user: alice, socketSID: "OLD", pid: "P", recovered: true, rooms: [("a", "1-0:0000000a")])
        XCTAssertEqual(s.connectFinished(.success(answer), now: 2), [.limits(LimitsInForce(maxMessageBytes: 1_000_000, preAuthentication: false)), .send(Array("40{\"sid\":\"OLD\",\"pid\":\"P\",\"recovered\":true,\"rooms\":{\"a\":\"1-0:0000000a\"}}".utf8))])
        XCTAssertEqual(s.socketSID, "OLD", "a recovered session takes back its sid")
        // A repeated CONNECT gets the same answer.
        XCTAssertEqual(s.receive(ArraySlice("40".utf8), from: .websocket, now: 3, wallMs: 3).count, 1)
        XCTAssertFalse(s.clientDisconnected)
        _ = s.receive(ArraySlice("41".utf8), from: .websocket, now: 4, wallMs: 4)
        XCTAssertTrue(s.clientDisconnected, "a socket that sent DISCONNECT is not kept for recovery")
    }

    func testMalformedRoomsRefuseTheConnect() {
        var s = EngineSession(configuration: SessionConfiguration.testing, transport: .websocket, engineSID: "E", socketSID: "S", now: 0)
        _ = s.start(now: 0)
        let actions = s.receive(ArraySlice("40{\"token\":\"t\",\"rooms\":\"a\"}".utf8), from: .websocket, now: 1, wallMs: 1)
        XCTAssertEqual(actions.count, 1)
        guard case .send(let refusal) = actions.first else { return XCTFail("\(actions)") }
        XCTAssertTrue(String(decoding: refusal, as: UTF8.self).contains("invalid_payload"), "\(actions)")
        XCTAssertEqual(s.phase, .awaitingConnect)
    }
}
