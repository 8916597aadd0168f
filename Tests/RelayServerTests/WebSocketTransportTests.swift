import NIOCore
import NIOEmbedded
import NIOWebSocket
import RelayCore
import XCTest

@testable import RelayServer

final class WebSocketTransportTests: XCTestCase {
    func testOpenPacketCarriesConfiguredHeartbeatAndLimits() throws {
        let h = Harness { $0.engine.pingIntervalMs = 1000; $0.engine.pingTimeoutMs = 500; $0.engine.maxPayload = 4096 }
        let s = try h.session()
        let open = try s.texts()
        XCTAssertEqual(open.count, 1)
        let json = try JSONParser.parse(String(open[0].dropFirst()))
        XCTAssertTrue(open[0].hasPrefix("0{"))
        XCTAssertEqual(json["upgrades"], .array([]))
        XCTAssertEqual(json["pingInterval"], 1000)
        XCTAssertEqual(json["pingTimeout"], 500)
        XCTAssertEqual(json["maxPayload"], 4096)
        XCTAssertNotNil(json["sid"]?.stringValue)
    }

    func testConnectWithValidTokenAnswersSid() throws {
        let h = Harness()
        let s = try h.session()
        let reply = try s.connect("alice")
        XCTAssertNotNil(try JSONParser.parse(String(reply.dropFirst(2)))["sid"]?.stringValue)
        XCTAssertEqual(h.relay.hub.connectionCount, 1)
    }

    func testBadTokenGetsConnectErrorAndTheSessionStaysOpen() throws {
        let h = Harness()
        let s = try h.session()
        _ = try s.texts()
        try s.send("40{\"token\":\"nope\"}")
        let frames = try s.frames()
        let text = frames.filter { $0.opcode == .text }.map { String(buffer: $0.data) }
        XCTAssertEqual(text, ["44{\"message\":\"token signature is invalid\",\"data\":{\"code\":\"token_bad_signature\"}}"])
        XCTAssertNil(frames.first { $0.opcode == .connectionClose }, "open for another CONNECT")
        XCTAssertEqual(h.relay.hub.connectionCount, 0)
        // Another CONNECT on the same session, with a token that works.
        let reply = try s.connect("alice")
        XCTAssertNotNil(try JSONParser.parse(String(reply.dropFirst(2)))["sid"]?.stringValue)
        XCTAssertEqual(h.relay.hub.connectionCount, 1)
    }

    func testTheLastRefusalOfASessionCloses4003() throws {
        let h = Harness { $0.engine.maxConnectRefusals = 2 }
        let s = try h.session()
        _ = try s.texts()
        try s.send("40{\"token\":\"nope\"}")
        XCTAssertNil(try s.frames().first { $0.opcode == .connectionClose })
        try s.send("40{\"token\":\"nope\"}")
        let frames = try s.frames()
        XCTAssertEqual(frames.filter { $0.opcode == .text }.count, 1, "the refusal, then the close")
        var close = try XCTUnwrap(frames.first { $0.opcode == .connectionClose }).data
        XCTAssertEqual(close.readInteger(as: UInt16.self), CloseCode.authenticationFailed)
    }

    func testOtherNamespaceIsRefused() throws {
        let h = Harness()
        let s = try h.session()
        _ = try s.texts()
        try s.send("40/admin,{\"token\":\"alice\"}")
        XCTAssertEqual(try s.texts(), ["44/admin,{\"message\":\"Invalid namespace\"}"])
    }

    func testNoConnectWithinTimeoutCloses4001() throws {
        let h = Harness { $0.engine.connectTimeoutMs = 300 }
        let s = try h.session()
        _ = try s.frames()
        h.advance(ms: 299)
        XCTAssertNil(try s.closeCode())
        h.advance(ms: 1)
        XCTAssertEqual(try s.closeCode(), CloseCode.connectTimeout)
    }

    func testPingWithoutPongCloses4000AndPongKeepsAlive() throws {
        let h = Harness { $0.engine.pingIntervalMs = 1000; $0.engine.pingTimeoutMs = 500 }
        let s = try h.session()
        try s.connect("alice")
        h.advance(ms: 1000)
        XCTAssertEqual(try s.texts(), ["2"])
        try s.send("3")
        h.advance(ms: 1000)
        XCTAssertEqual(try s.texts(), ["2"], "answered ping: next ping, no close")
        h.advance(ms: 500)
        XCTAssertEqual(try s.closeCode(), CloseCode.pingTimeout)
    }

    func testOversizedFragmentedMessageCloses1009() throws {
        let h = Harness { $0.engine.maxPayload = 100 }
        let s = try h.session()
        try s.connect("alice")
        try s.send(String(repeating: "a", count: 60), fin: false)
        try s.send(String(repeating: "a", count: 60), fin: true, opcode: .continuation)
        XCTAssertEqual(try s.closeCode(), CloseCode.messageTooBig)
    }

    func testOversizedSingleFrameFromDecoderCloses1009() throws {
        let h = Harness()
        let s = try h.session()
        try s.connect("alice")
        s.channel.pipeline.fireErrorCaught(NIOWebSocketError.invalidFrameLength)
        XCTAssertEqual(try s.closeCode(), CloseCode.messageTooBig)
    }

    func testUnmaskedFrameCloses1002() throws {
        let h = Harness()
        let s = try h.session()
        try s.sendBytes(Array("40".utf8), masked: false)
        XCTAssertEqual(try s.closeCode(), CloseCode.protocolError)
    }

    func testReservedBitWithoutExtensionCloses1002() throws {
        let h = Harness()
        let s = try h.session()
        try s.sendBytes(Array("40".utf8), rsv1: true)
        XCTAssertEqual(try s.closeCode(), CloseCode.protocolError)
    }

    func testABinaryMessageWithoutAHeaderIsAnInvalidPacket() throws {
        let h = Harness()
        let s = try h.session()
        try s.connect("alice")
        try s.sendBytes([1, 2, 3], opcode: .binary)
        XCTAssertEqual(try s.closeCode(), CloseCode.protocolError, "the packet does not parse: closed, as the protocol says")
    }

    func testABinaryEventIsForwardedWithItsAttachmentFrames() throws {
        let h = Harness()
        let sender = try h.session()
        let receiver = try h.session()
        for (s, user) in [(sender, "alice"), (receiver, "bob")] {
            try s.connect(user)
            try s.send("421[\"room:join\",{\"room\":\"conversation:1\"}]")
        }
        _ = try sender.frames()
        _ = try receiver.frames()
        try sender.send("451-2[\"file:shared\",{\"room\":\"conversation:1\",\"f\":{\"_placeholder\":true,\"num\":0}}]")
        try sender.sendBytes([0, 1, 2, 255], opcode: .binary)
        XCTAssertEqual(try sender.texts(), ["432[{\"ok\":true}]"])
        let frames = try receiver.frames()
        XCTAssertEqual(frames.map(\.opcode), [.text, .binary])
        let header = String(buffer: frames[0].data)
        XCTAssertTrue(header.hasPrefix("451-[\"file:shared\",{\"room\":\"conversation:1\",\"f\":{\"_placeholder\":true,\"num\":0},\"from\":\"alice\""), header)
        XCTAssertEqual(Array(frames[1].data.readableBytesView), [0, 1, 2, 255])
    }

    func testInvalidUTF8Closes1007() throws {
        let h = Harness()
        let s = try h.session()
        try s.connect("alice")
        try s.sendBytes([0x34, 0x32, 0xC3, 0x28])
        XCTAssertEqual(try s.closeCode(), CloseCode.invalidPayloadData)
    }

    /// The ASCII fast path and the full check agree with the standard library's validation.
    func testUTF8CheckAcceptsValidTextAndRefusesInvalidBytes() {
        func valid(_ bytes: [UInt8]) -> Bool { WebSocketMessageReader.isValidUTF8(ByteBuffer(bytes: bytes).readableBytesView) }
        XCTAssertTrue(valid([]))
        XCTAssertTrue(valid(Array("42[\"message:new\",{\"room\":\"r\"}]".utf8)))
        XCTAssertTrue(valid(Array("é 日本 🙂".utf8)))
        XCTAssertTrue(valid([0x7F]))
        XCTAssertFalse(valid([0x80]), "a lone continuation byte")
        XCTAssertFalse(valid([0x34, 0x32, 0xC3, 0x28]), "a broken two-byte sequence")
        XCTAssertFalse(valid([0xC0, 0xAF]), "an overlong encoding")
        XCTAssertFalse(valid([0xED, 0xA0, 0x80]), "a surrogate")
        XCTAssertFalse(valid([0xF0, 0x9F, 0x99]), "a truncated sequence")
        XCTAssertFalse(valid(Array("ok".utf8) + [0xFF]), "ASCII then an invalid byte")
    }

    func testContinuationWithoutStartCloses1002() throws {
        let h = Harness()
        let s = try h.session()
        try s.send("x", opcode: .continuation)
        XCTAssertEqual(try s.closeCode(), CloseCode.protocolError)
    }

    func testInvalidEventNameGetsErrorAckAndErrorEvent() throws {
        let h = Harness()
        let s = try h.session()
        try s.connect("alice")
        try s.send("427[\"Bad_Name\",{}]")
        XCTAssertEqual(try s.texts(), ["437[{\"ok\":false,\"error\":{\"code\":\"invalid_event_name\",\"message\":\"invalid event name: Bad_Name\"}}]"])
        try s.send("42[\"typing_start\",{}]")
        let texts = try s.texts()
        XCTAssertEqual(texts.count, 1)
        XCTAssertTrue(texts[0].hasPrefix("42[\"error\",{\"code\":\"invalid_event_name\""), texts[0])
        XCTAssertTrue(texts[0].contains("\"event\":\"typing_start\""))
    }

    func testEventBeforeConnectIsRefused() throws {
        let h = Harness()
        let s = try h.session()
        _ = try s.texts()
        try s.send("421[\"room:join\",{\"room\":\"conversation:1\"}]")
        XCTAssertEqual(try s.texts(), ["431[{\"ok\":false,\"error\":{\"code\":\"not_connected\",\"message\":\"send CONNECT (40) first\"}}]"])
    }

    func testMalformedPacketAfterConnectCloses1002() throws {
        let h = Harness()
        let s = try h.session()
        try s.connect("alice")
        try s.send("42[\"room:join\",{")
        XCTAssertEqual(try s.closeCode(), CloseCode.protocolError, "a packet that does not parse closes, as the protocol says")
        XCTAssertEqual(h.relay.hub.connectionCount, 0)
    }

    func testDisconnectKeepsTheEngineSessionAndAllowsANewConnect() throws {
        let h = Harness()
        let s = try h.session()
        try s.connect("alice")
        XCTAssertEqual(h.relay.hub.connectionCount, 1)
        try s.send("41")
        XCTAssertNil(try s.closeCode(), "the Engine.IO session stays open")
        XCTAssertEqual(h.relay.hub.connectionCount, 0, "the socket left the hub")
        try s.send("40{\"token\":\"alice\"}")
        XCTAssertTrue(try s.texts().first?.hasPrefix("40{") == true)
        XCTAssertEqual(h.relay.hub.connectionCount, 1, "registered again")
    }

    func testRateLimitAnswersRateLimited() throws {
        let h = Harness { $0.events.eventsPerSecond = .init(perSecond: 1, burst: 2) }
        let s = try h.session()
        try s.connect("alice")
        for i in 1...3 { try s.send("42\(i)[\"presence:list\",{\"room\":\"conversation:1\"}]") }
        let texts = try s.texts()
        XCTAssertEqual(texts.count, 3)
        XCTAssertTrue(texts[2].hasPrefix("433[{\"ok\":false,\"error\":{\"code\":\"rate_limited\""), texts[2])
    }

    func testRefusedEventNamesSpendTheBudgetToo() throws {
        let h = Harness { $0.events.eventsPerSecond = .init(perSecond: 1, burst: 3) }
        let s = try h.session()
        try s.connect("alice")
        for i in 1...4 { try s.send("42\(i)[\"Bad_Name\",{}]") }
        let texts = try s.texts()
        XCTAssertEqual(texts.count, 4)
        XCTAssertTrue(texts[0].contains("invalid_event_name"), texts[0])
        XCTAssertTrue(texts[3].contains("rate_limited"), "unlimited error replies are not free: \(texts[3])")
    }

    func testClientCloseFrameIsEchoed() throws {
        let h = Harness()
        let s = try h.session()
        var payload: [UInt8] = [0x03, 0xE8]
        payload += Array("bye".utf8)
        try s.sendBytes(payload, opcode: .connectionClose)
        XCTAssertEqual(try s.closeCode(), 1000)
    }
}
