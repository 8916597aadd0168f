import XCTest
@testable import RelayCore

final class SocketPacketTests: XCTestCase {
    private func decode(_ text: String, file: StaticString = #filePath, line: UInt = #line) -> SocketPacket? {
        do { return try SocketPacket.decode(ArraySlice(text.utf8)) } catch {
            XCTFail("unexpected \(error) for \(text)", file: file, line: line)
            return nil
        }
    }

    // MARK: - Decoding

    func testConnect() {
        XCTAssertEqual(decode("0"), SocketPacket(type: .connect))
        XCTAssertEqual(decode(#"0{"token":"abc"}"#), SocketPacket(type: .connect, data: .object([("token", "abc")])))
    }

    func testDisconnect() {
        XCTAssertEqual(decode("1"), SocketPacket(type: .disconnect))
    }

    func testEvent() {
        let p = decode(#"2["typing:start",{"room":"r1"}]"#)
        XCTAssertEqual(p?.type, .event)
        XCTAssertEqual(p?.namespace, "/")
        XCTAssertNil(p?.ackID)
        XCTAssertEqual(p?.data, .array(["typing:start", .object([("room", "r1")])]))
    }

    func testEventWithAckID() {
        let p = decode(#"212["message:read",{}]"#)
        XCTAssertEqual(p?.ackID, 12)
        XCTAssertEqual(p?.data, .array(["message:read", .object([])]))
        XCTAssertEqual(decode(#"20["a:b"]"#)?.ackID, 0)
    }

    func testAck() {
        let p = decode(#"37[{"ok":true}]"#)
        XCTAssertEqual(p, SocketPacket(type: .ack, ackID: 7, data: .array([.object([("ok", true)])])))
        XCTAssertEqual(decode("399"), SocketPacket(type: .ack, ackID: 99))
    }

    func testConnectError() {
        XCTAssertEqual(decode(#"4{"message":"no"}"#)?.type, .connectError)
    }

    func testNamespace() {
        XCTAssertEqual(decode("0/admin,"), SocketPacket(type: .connect, namespace: "/admin"))
        XCTAssertEqual(decode("1/admin"), SocketPacket(type: .disconnect, namespace: "/admin"))
        XCTAssertEqual(
            decode(#"2/chat,5["a:b",1]"#),
            SocketPacket(type: .event, namespace: "/chat", ackID: 5, data: .array(["a:b", 1])))
        XCTAssertEqual(decode(#"2/,["a:b"]"#)?.namespace, "/")
        XCTAssertEqual(decode(#"0/ns,{"t":1}"#), SocketPacket(type: .connect, namespace: "/ns", data: .object([("t", 1)])))
    }

    func testNamespaceWithoutCommaRunsToTheEnd() {
        // Like the reference parser: the namespace runs to the next comma.
        XCTAssertEqual(decode(#"2/chat["a:b"]"#)?.namespace, #"/chat["a:b"]"#)
    }

    func testWhitespaceAroundJSON() {
        XCTAssertEqual(decode(#"2 ["a:b"] "#)?.data, .array(["a:b"]))
    }

    func testAcceptsSliceWithNonZeroStartIndex() throws {
        let bytes = Array(#"xyz/ns,3["a:b"]"#.utf8)
        // "2" prepended at index 2: decode the slice "2/ns,3[...]" whose startIndex is not 0.
        var buffer = bytes
        buffer[2] = UInt8(ascii: "2")
        let p = try SocketPacket.decode(buffer[2...])
        XCTAssertEqual(p, SocketPacket(type: .event, namespace: "/ns", ackID: 3, data: .array(["a:b"])))
    }

    // MARK: - Limits

    func testNamespaceLengthLimit() {
        let ok = "/" + String(repeating: "n", count: 127)  // 128 bytes
        XCTAssertEqual(decode("2\(ok),[\"a:b\"]")?.namespace, ok)
        XCTAssertEqual(decode("1\(ok)")?.namespace, ok)
        let long = "/" + String(repeating: "n", count: 128)  // 129 bytes
        assertSocketError("2\(long),[\"a:b\"]", .invalidNamespace)
        assertSocketError("1\(long)", .invalidNamespace)
        assertSocketError("2/" + String(repeating: "x", count: 100_000), .invalidNamespace)
    }

    func testAckIDLengthLimit() {
        XCTAssertEqual(decode(#"2999999999999999["a:b"]"#)?.ackID, 999_999_999_999_999)  // 15 digits
        XCTAssertEqual(decode("3000000000000001")?.ackID, 1)
        assertSocketError(#"21234567890123456["a:b"]"#, .invalidAckID)  // 16 digits
        assertSocketError("3" + String(repeating: "9", count: 40), .invalidAckID)
        assertSocketError("2/ns," + String(repeating: "1", count: 16) + "[]", .invalidAckID)
    }

    // MARK: - Errors

    func testEmpty() {
        assertSocketError("", .emptyPacket)
    }

    func testUnknownType() {
        assertSocketError("7", .unknownSocketPacketType(UInt8(ascii: "7")))
        assertSocketError("9[]", .unknownSocketPacketType(UInt8(ascii: "9")))
        assertSocketError("a", .unknownSocketPacketType(UInt8(ascii: "a")))
        assertSocketError("/", .unknownSocketPacketType(UInt8(ascii: "/")))
        assertSocketError(" 2", .unknownSocketPacketType(UInt8(ascii: " ")))
    }

    func testBinaryHeadersDecode() {
        // The attachments follow separately (BinaryPacketTests); bare headers without a count are refused.
        XCTAssertEqual(decode(#"51-["a:b",{"_placeholder":true,"num":0}]"#)?.attachmentCount, 1)
        XCTAssertEqual(decode(#"61-3[{"_placeholder":true,"num":0}]"#)?.type, .binaryAck)
        assertSocketError("5", .invalidAttachmentCount)
        assertSocketError("6", .invalidAttachmentCount)
    }

    func testInvalidJSON() {
        assertSocketError(#"2["a:b""#, .invalidJSON(.unexpectedEnd))
        assertSocketError("2[", .invalidJSON(.unexpectedEnd))
        assertSocketError(#"2["a:b",]"#, .invalidJSON(.unexpectedByte(UInt8(ascii: "]"), offset: 7)))
        assertSocketError(#"2["a:b"]x"#, .invalidJSON(.trailingBytes(offset: 7)))
        assertSocketError("2abc", .invalidJSON(.unexpectedByte(UInt8(ascii: "a"), offset: 0)))
        assertSocketError(#"21-["a:b"]"#, .invalidJSON(.invalidNumber(offset: 0)))
        assertSocketError("2[\"a\u{1}\"]", .invalidJSON(.controlCharacterInString(offset: 3)))
        assertSocketError(#"2["\uDC00"]"#, .invalidJSON(.invalidUnicode(offset: 8)))
        assertSocketError(#"2["\q"]"#, .invalidJSON(.invalidEscape(offset: 3)))
        assertSocketError("2[1e999]", .invalidJSON(.invalidNumber(offset: 1)))
        // Offsets are relative to the start of the JSON, after the namespace and ack id.
        assertSocketError(#"2/ns,42[1,}"#, .invalidJSON(.unexpectedByte(UInt8(ascii: "}"), offset: 3)))
    }

    func testDepthLimitIsPassedThrough() {
        let deep = "2" + String(repeating: "[", count: 33) + String(repeating: "]", count: 33)
        assertSocketError(deep, .invalidJSON(.tooDeep(limit: 32)))
        assertSocketError(#"2["a:b",[[1]]]"#, .invalidJSON(.tooDeep(limit: 2)), maxDepth: 2)
        XCTAssertNoThrow(try SocketPacket.decode(ArraySlice(#"2["a:b",[1]]"#.utf8), maxDepth: 2))
    }

    // MARK: - Encoding

    func testEncodedMessage() {
        func text(_ p: SocketPacket) -> String { String(decoding: p.encodedMessage(), as: UTF8.self) }
        XCTAssertEqual(text(SocketPacket(type: .connect, data: .object([("sid", "s1")]))), #"40{"sid":"s1"}"#)
        XCTAssertEqual(text(SocketPacket(type: .disconnect)), "41")
        XCTAssertEqual(text(SocketPacket(type: .event, data: .array(["a:b", 1]))), #"42["a:b",1]"#)
        XCTAssertEqual(text(SocketPacket(type: .event, ackID: 9, data: .array(["a:b"]))), #"429["a:b"]"#)
        XCTAssertEqual(text(SocketPacket(type: .ack, ackID: 3, data: .array([]))), "433[]")
        XCTAssertEqual(text(SocketPacket(type: .connectError, data: .object([("message", "x")]))), #"44{"message":"x"}"#)
        XCTAssertEqual(text(SocketPacket(type: .event, namespace: "/admin", ackID: 1, data: .array(["a:b"]))), #"42/admin,1["a:b"]"#)
    }

    func testEncodeDecodeRoundTrip() throws {
        let packets = [
            SocketPacket(type: .connect),
            SocketPacket(type: .connect, data: .object([("token", "t")])),
            SocketPacket(type: .disconnect),
            SocketPacket(type: .event, data: .array(["room:join", .object([("room", "conversation:1")])])),
            SocketPacket(type: .event, ackID: 123_456, data: .array(["a:b", "é😀\"\n", 1.5, nil])),
            SocketPacket(type: .ack, ackID: 0, data: .array([.object([("ok", true)])])),
            SocketPacket(type: .connectError, data: .object([("message", "m"), ("data", .object([("code", "token_expired")]))])),
            SocketPacket(type: .event, namespace: "/other", ackID: 42, data: .array(["x:y"])),
        ]
        for packet in packets {
            let message = packet.encodedMessage()
            guard case .message(let data) = try EnginePacket.decode(message[...]) else { return XCTFail("expected an Engine.IO message") }
            XCTAssertEqual(try SocketPacket.decode(data), packet)
        }
    }

    func testEventMessage() throws {
        let bytes = SocketPacket.eventMessage(name: "typing:start", payload: .object([("room", "r"), ("from", "u")]))
        XCTAssertEqual(String(decoding: bytes, as: UTF8.self), #"42["typing:start",{"room":"r","from":"u"}]"#)
        guard case .message(let data) = try EnginePacket.decode(bytes[...]) else { return XCTFail("expected message") }
        let event = try InboundEvent(packet: try SocketPacket.decode(data))
        XCTAssertEqual(event.name, "typing:start")
        XCTAssertEqual(event.payload["from"], "u")
    }

    func testEventMessageEscapesTheName() {
        let bytes = SocketPacket.eventMessage(name: "a\"b", payload: .null)
        XCTAssertEqual(String(decoding: bytes, as: UTF8.self), #"42["a\"b",null]"#)
    }

    func testAckMessage() throws {
        let bytes = SocketPacket.ackMessage(id: 17, payload: .object([("ok", true)]))
        XCTAssertEqual(String(decoding: bytes, as: UTF8.self), #"4317[{"ok":true}]"#)
        guard case .message(let data) = try EnginePacket.decode(bytes[...]) else { return XCTFail("expected message") }
        XCTAssertEqual(try SocketPacket.decode(data), SocketPacket(type: .ack, ackID: 17, data: .array([.object([("ok", true)])])))
    }

    func testPacketTypeRawValues() {
        XCTAssertEqual(SocketPacketType.connect.rawValue, 0)
        XCTAssertEqual(SocketPacketType.disconnect.rawValue, 1)
        XCTAssertEqual(SocketPacketType.event.rawValue, 2)
        XCTAssertEqual(SocketPacketType.ack.rawValue, 3)
        XCTAssertEqual(SocketPacketType.connectError.rawValue, 4)
        XCTAssertEqual(SocketPacketType.binaryEvent.rawValue, 5)
        XCTAssertEqual(SocketPacketType.binaryAck.rawValue, 6)
        XCTAssertNil(SocketPacketType(rawValue: 7))
    }
}
