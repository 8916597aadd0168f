import XCTest
@testable import RelayCore

final class EnginePacketTests: XCTestCase {
    private func decode(_ text: String) throws(ProtocolError) -> EnginePacket {
        try EnginePacket.decode(ArraySlice(text.utf8))
    }

    private func assertError(_ bytes: [UInt8], _ expected: ProtocolError, file: StaticString = #filePath, line: UInt = #line) {
        do {
            let p = try EnginePacket.decode(bytes[...])
            XCTFail("expected \(expected), decoded \(p)", file: file, line: line)
        } catch {
            XCTAssertEqual(error, expected, file: file, line: line)
        }
    }

    func testDecodesEveryType() throws {
        XCTAssertEqual(try decode(#"0{"sid":"x"}"#), .open(#"{"sid":"x"}"#))
        XCTAssertEqual(try decode("1"), .close)
        XCTAssertEqual(try decode("2"), .ping(""))
        XCTAssertEqual(try decode("2probe"), .ping("probe"))
        XCTAssertEqual(try decode("3"), .pong(""))
        XCTAssertEqual(try decode("3probe"), .pong("probe"))
        XCTAssertEqual(try decode("5"), .upgrade)
        XCTAssertEqual(try decode("6"), .noop)
    }

    func testMessageCarriesTheRestOfTheFrame() throws {
        let frame = Array(#"42["typing:start",{"room":"r"}]"#.utf8)
        guard case .message(let data) = try EnginePacket.decode(frame[...]) else { return XCTFail("expected a message") }
        XCTAssertEqual(Array(data), Array(frame.dropFirst()))
        XCTAssertEqual(try decode("4"), .message([]))
    }

    func testMessageFromASliceWithNonZeroStartIndex() throws {
        let buffer = Array("xx42[\"a:b\"]".utf8)
        let frame = buffer[2...]
        guard case .message(let data) = try EnginePacket.decode(frame) else { return XCTFail("expected a message") }
        XCTAssertEqual(String(decoding: data, as: UTF8.self), #"2["a:b"]"#)
        let packet = try SocketPacket.decode(data)
        XCTAssertEqual(packet.type, .event)
    }

    func testEmptyFrameIsRefused() {
        assertError([], .emptyPacket)
    }

    func testUnknownTypesAreRefused() {
        assertError(Array("7".utf8), .unknownEnginePacketType(UInt8(ascii: "7")))
        assertError(Array("9x".utf8), .unknownEnginePacketType(UInt8(ascii: "9")))
        // Engine.IO v3 base64 binary ("b4...") is not a v4 WebSocket text packet.
        assertError(Array("b4AAAA".utf8), .unknownEnginePacketType(UInt8(ascii: "b")))
        assertError(Array(" 2".utf8), .unknownEnginePacketType(UInt8(ascii: " ")))
        assertError([0x00], .unknownEnginePacketType(0))
        assertError([0xFF, 0x32], .unknownEnginePacketType(0xFF))
    }

    func testOpenPayload() throws {
        let bytes = EnginePacket.openPayload(sid: "abc123", pingInterval: 25_000, pingTimeout: 20_000, maxPayload: 1_000_000)
        let text = String(decoding: bytes, as: UTF8.self)
        XCTAssertEqual(text, #"0{"sid":"abc123","upgrades":[],"pingInterval":25000,"pingTimeout":20000,"maxPayload":1000000}"#)
        guard case .open(let json) = try EnginePacket.decode(bytes[...]) else { return XCTFail("expected open") }
        let v = try JSONParser.parse(json)
        XCTAssertEqual(v["sid"], .string("abc123"))
        XCTAssertEqual(v["upgrades"], .array([]))
        XCTAssertEqual(v["pingInterval"]?.intValue, 25_000)
        XCTAssertEqual(v["pingTimeout"]?.intValue, 20_000)
        XCTAssertEqual(v["maxPayload"]?.intValue, 1_000_000)
    }

    func testOpenPayloadEscapesTheSid() throws {
        let bytes = EnginePacket.openPayload(sid: "a\"b", pingInterval: 1, pingTimeout: 2, maxPayload: 3)
        let v = try JSONParser.parse(Array(bytes.dropFirst()))
        XCTAssertEqual(v["sid"], .string("a\"b"))
    }

    func testStaticFrames() throws {
        XCTAssertEqual(EnginePacket.pingFrame, [UInt8(ascii: "2")])
        XCTAssertEqual(EnginePacket.closeFrame, [UInt8(ascii: "1")])
        XCTAssertEqual(try EnginePacket.decode(EnginePacket.pingFrame[...]), .ping(""))
        XCTAssertEqual(try EnginePacket.decode(EnginePacket.closeFrame[...]), .close)
    }
}
