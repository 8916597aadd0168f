import RelayTestSupport
import XCTest
@testable import RelayCore

/// One set of limits for both transports, both packet kinds, before and after CONNECT
/// (`InboundBudget`, the event size as recipients pay it, binary before CONNECT).
final class SessionLimitsTests: XCTestCase {
    typealias Action = EngineSession.Action

    let alice = AuthenticatedUser(userID: "alice", rooms: RoomAuthorization(patterns: ["conversation:*"]), expiresAt: .max)
    let transports: [EngineSession.Transport] = [.websocket, .polling]

    func makeSession(_ transport: EngineSession.Transport, configure: (inout SessionConfiguration) -> Void = { _ in }) -> EngineSession {
        var c = SessionConfiguration.testing
        c.heartbeat.intervalMs = 1000
        c.heartbeat.timeoutMs = 500
        c.connectTimeoutMs = 300
        c.budgets.inbound.packets = .init(perSecond: 10, burst: 20)
        configure(&c)
        var s = EngineSession(configuration: c, transport: transport, engineSID: "E", socketSID: "S", now: 0)
        _ = s.start(now: 0)
        return s
    }

    func connected(_ transport: EngineSession.Transport, configure: (inout SessionConfiguration) -> Void = { _ in }) -> EngineSession {
        var s = makeSession(transport, configure: configure)
        _ = receive(&s, "40{\"token\":\"t\"}", from: transport)
        _ = s.connectFinished(.success(ConnectAnswer(user: alice)), now: 0)
        return s
    }

    func receive(_ s: inout EngineSession, _ text: String, from: EngineSession.Transport, at now: Int64 = 0) -> [Action] {
        s.receive(Array(text.utf8)[...], from: from, now: now, wallMs: 1_000_000)
    }

    func texts(_ actions: [Action]) -> [String] {
        actions.compactMap { if case .send(let b) = $0 { return String(decoding: b, as: UTF8.self) } else { return nil } }
    }

    // MARK: Packets

    func testAPingFloodClosesWith1008OnEveryTransportBeforeAndAfterConnect() {
        for transport in transports {
            for loggedIn in [false, true] {
                var s = loggedIn ? connected(transport) : makeSession(transport)
                // CONNECT spent one packet of the 20 for the logged-in session.
                let allowed = loggedIn ? 19 : 20
                var answered = 0
                var closed: [Action] = []
                for _ in 0..<1000 {
                    let actions = receive(&s, "2", from: transport)
                    if actions == [.send(Array("3".utf8))] { answered += 1 } else { closed = actions; break }
                }
                XCTAssertEqual(answered, allowed, "\(transport) loggedIn=\(loggedIn)")
                XCTAssertEqual(closed, [.close(code: CloseCode.policyViolation, reason: "too many packets")], "\(transport) loggedIn=\(loggedIn)")
                XCTAssertEqual(receive(&s, "2", from: transport), [], "nothing after the close")
            }
        }
    }

    func testThePacketBudgetRefillsWithTime() {
        var s = connected(.websocket)
        for _ in 0..<19 { XCTAssertEqual(texts(receive(&s, "2", from: .websocket)), ["3"]) }
        // 10 per second: 100 ms buys one more.
        XCTAssertEqual(texts(receive(&s, "2", from: .websocket, at: 100)), ["3"])
        XCTAssertEqual(receive(&s, "2", from: .websocket, at: 100), [.close(code: CloseCode.policyViolation, reason: "too many packets")])
    }

    func testAttachmentsSpendThePacketBudgetToo() {
        // CONNECT spends one of 3; the header one; the first attachment the last.
        var s = connected(.websocket) { $0.budgets.inbound.packets = .init(perSecond: 1, burst: 3) }
        XCTAssertEqual(receive(&s, "452-[\"file:x\",{\"room\":\"conversation:1\",\"a\":{\"_placeholder\":true,\"num\":0},\"b\":{\"_placeholder\":true,\"num\":1}}]", from: .websocket), [])
        XCTAssertEqual(s.receiveBinary([1], from: .websocket, now: 0, wallMs: 0), [])
        XCTAssertEqual(s.receiveBinary([2], from: .websocket, now: 0, wallMs: 0), [.close(code: CloseCode.policyViolation, reason: "too many packets")])
    }

    func testInboundBytesAreBoundedWhateverThePacket() {
        for transport in transports {
            var s = connected(transport) {
                $0.budgets.inbound.bytes = .init(perSecond: 100, burst: 1000)
            }
            // Acks answer nothing the relay asked, but are read: they spend bytes.
            let ack = "430[\"\(String(repeating: "x", count: 600))\"]"
            XCTAssertEqual(receive(&s, ack, from: transport), [])
            XCTAssertEqual(receive(&s, ack, from: transport), [.close(code: CloseCode.policyViolation, reason: "too many packets")])
        }
    }

    func testWebSocketControlFramesSpendTheBudget() {
        var s = makeSession(.websocket)
        for _ in 0..<20 { XCTAssertEqual(s.receiveFrame(size: 10, now: 0), []) }
        XCTAssertEqual(s.receiveFrame(size: 10, now: 0), [.close(code: CloseCode.policyViolation, reason: "too many packets")])
        XCTAssertEqual(s.receiveFrame(size: 10, now: 0), [])
    }

    func testPingDataIsBounded() {
        for transport in transports {
            var s = makeSession(transport)
            XCTAssertEqual(texts(receive(&s, "2probe", from: transport)), ["3probe"])
            XCTAssertEqual(texts(receive(&s, "2" + String(repeating: "x", count: 64), from: transport)).first?.count, 65)
            XCTAssertEqual(receive(&s, "2" + String(repeating: "x", count: 65), from: transport), [.close(code: CloseCode.protocolError, reason: "ping data too long")])
        }
    }

    // MARK: Binary before CONNECT

    func testABinaryPacketBeforeConnectIsRefusedAtItsHeader() {
        for transport in transports {
            for header in ["451-[\"x:y\",{\"room\":\"conversation:1\",\"f\":{\"_placeholder\":true,\"num\":0}}]", "461-3[{\"_placeholder\":true,\"num\":0}]"] {
                var s = makeSession(transport)
                let actions = receive(&s, header, from: transport)
                XCTAssertEqual(texts(actions).count, 1, "\(actions)")
                XCTAssertTrue(texts(actions).first?.hasPrefix("44{") == true, "\(actions)")
                XCTAssertTrue(texts(actions).first?.contains("not_connected") == true, "\(actions)")
                XCTAssertEqual(s.phase, .awaitingConnect, "a refusal leaves the session open")
                // Its attachment is skipped: not assembled, and no second refusal.
                XCTAssertEqual(s.receiveBinary([1, 2, 3], from: transport, now: 0, wallMs: 0), [])
                // One more is a binary message no header announced: refused.
                let stray = texts(s.receiveBinary([1, 2, 3], from: transport, now: 0, wallMs: 0))
                XCTAssertEqual(stray.count, 1)
                XCTAssertTrue(stray.first?.contains("invalid_packet") == true, "\(stray)")
            }
        }
    }

    // MARK: Event size as recipients pay it

    func binaryEvent(attachments: Int, json: Int = 0) -> String {
        let placeholders = (0..<attachments).map { ",\"a\($0)\":{\"_placeholder\":true,\"num\":\($0)}" }.joined()
        return "45\(attachments)-1[\"chat:big\",{\"room\":\"conversation:1\",\"x\":\"\(String(repeating: "a", count: json))\"\(placeholders)}]"
    }

    func testABinaryEventWithoutAttachmentsIsHeldToTheEventLimit() {
        for transport in transports {
            var s = connected(transport) { $0.maxEventBytes = 4096 }
            let big = receive(&s, binaryEvent(attachments: 0, json: 200_000), from: transport)
            XCTAssertTrue(texts(big).first?.hasPrefix("431[{\"ok\":false,\"error\":{\"code\":\"payload_too_large\"") == true, "\(transport): \(big)")
            // The same as a text event.
            let text = receive(&s, "421[\"chat:big\",{\"room\":\"conversation:1\",\"x\":\"\(String(repeating: "a", count: 200_000))\"}]", from: transport)
            XCTAssertTrue(texts(text).first?.hasPrefix("431[{\"ok\":false,\"error\":{\"code\":\"payload_too_large\"") == true, "\(transport): \(text)")
            let small = receive(&s, binaryEvent(attachments: 0, json: 100), from: transport)
            guard case .handle(.custom, 1, _)? = small.last else { return XCTFail("\(transport): \(small)") }
        }
    }

    func testAttachmentsCountAsBase64() throws {
        // 3060 bytes of attachment are 4080 of base64: over a 4096-byte limit with the header,
        // though the raw bytes would fit.
        let header = binaryEvent(attachments: 1)
        let cost = WireSize.polling(text: header.utf8.count, attachments: [3060])
        XCTAssertEqual(cost, header.utf8.count + 2 + 4080)
        XCTAssertGreaterThan(cost, 4096)
        XCTAssertLessThan(header.utf8.count + 3060, 4096)
        for transport in transports {
            var s = connected(transport) { $0.maxEventBytes = 4096 }
            XCTAssertEqual(receive(&s, header, from: transport), [])
            let attachment = [UInt8](repeating: 7, count: 3060)
            let actions: [Action]
            if transport == .websocket {
                actions = s.receiveBinary(attachment, from: .websocket, now: 0, wallMs: 0)
            } else {
                var packet: [UInt8] = [UInt8(ascii: "b")]
                Base64.encode(attachment, into: &packet)
                actions = s.receive(packet[...], from: .polling, now: 0, wallMs: 0)
            }
            XCTAssertTrue(texts(actions).first?.contains("payload_too_large") == true, "\(transport): \(actions)")
            // 2000 bytes cost 2668 + header: accepted.
            XCTAssertEqual(receive(&s, header, from: transport), [])
            let ok = transport == .websocket
                ? s.receiveBinary([UInt8](repeating: 7, count: 2000), from: .websocket, now: 0, wallMs: 0)
                : s.receive(ArraySlice(EncodedBinaryPacket.pollingPacket(forAttachment: [UInt8](repeating: 7, count: 2000))), from: .polling, now: 0, wallMs: 0)
            guard case .handle(.custom(let event), 1, _)? = ok.last else { return XCTFail("\(transport): \(ok)") }
            XCTAssertEqual(event.attachments.first?.count, 2000)
        }
    }

    func testEventBytesPerSecondRefuseWithRateLimitedAndRefill() {
        let event = "42[\"chat:big\",{\"room\":\"conversation:1\",\"x\":\"\(String(repeating: "a", count: 900))\"}]"
        let size = event.utf8.count
        for transport in transports {
            var s = connected(transport) {
                $0.budgets.inbound.packets = .init(perSecond: 1000, burst: 1000)
                $0.budgets.inbound.eventBytes = .init(perSecond: Double(size), burst: Double(size * 3))
            }
            for i in 0..<3 {
                guard case .handle? = receive(&s, event, from: transport).last else { return XCTFail("\(transport) event \(i)") }
            }
            let refused = receive(&s, event, from: transport)
            XCTAssertTrue(refused.contains(.rateLimited(.custom)), "\(refused)")
            XCTAssertTrue(texts(refused).first?.contains("rate_limited") == true, "\(refused)")
            XCTAssertFalse(s.isClosed, "a refusal, not a close")
            guard case .handle? = receive(&s, event, from: transport, at: 1000).last else { return XCTFail("refilled after a second") }
        }
    }

    // MARK: Wire sizes and the polling body

    func testWireSizes() {
        XCTAssertEqual(WireSize.base64(0), 0)
        XCTAssertEqual(WireSize.base64(1), 4)
        XCTAssertEqual(WireSize.base64(3), 4)
        XCTAssertEqual(WireSize.base64(4), 8)
        XCTAssertEqual(WireSize.polling(text: 10, attachments: []), 10)
        XCTAssertEqual(WireSize.polling(text: 10, attachments: [3, 0]), 10 + 6 + 2)
        XCTAssertEqual(WireSize.polling(text: .max - 1, attachments: [3]), .max, "saturates")
        XCTAssertEqual(WireSize.base64(.max), .max, "saturates")
    }

    func testPollingPayloadSplitsLazilyOnTheRecordSeparator() {
        func split(_ s: String) -> [String] { PollingPayload(Array(s.utf8)[...]).map { String(decoding: $0, as: UTF8.self) } }
        XCTAssertEqual(split(""), [""])
        XCTAssertEqual(split("2"), ["2"])
        XCTAssertEqual(split("2\u{1e}3"), ["2", "3"])
        XCTAssertEqual(split("\u{1e}"), ["", ""])
        XCTAssertEqual(split("a\u{1e}\u{1e}b\u{1e}"), ["a", "", "b", ""])
        // A million separators are walked one at a time; the reader may stop early.
        let body = [UInt8](repeating: 0x1E, count: 1_000_000)
        var iterator = PollingPayload(body[...])
        XCTAssertEqual(iterator.next()?.count, 0)
        XCTAssertEqual(iterator.next()?.count, 0)
    }
}
