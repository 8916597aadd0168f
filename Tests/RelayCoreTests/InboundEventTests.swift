import XCTest
@testable import RelayCore

final class InboundEventTests: XCTestCase {
    private func event(_ text: String) throws(ProtocolError) -> InboundEvent {
        try InboundEvent(packet: try SocketPacket.decode(ArraySlice(text.utf8)))
    }

    private func assertError(_ text: String, _ expected: ProtocolError, file: StaticString = #filePath, line: UInt = #line) {
        do {
            let e = try event(text)
            XCTFail("expected \(expected), got \(e)", file: file, line: line)
        } catch {
            XCTAssertEqual(error, expected, file: file, line: line)
        }
    }

    func testNameAndPayload() throws {
        let e = try event(#"2["typing:start",{"room":"r1"}]"#)
        XCTAssertEqual(e, InboundEvent(name: "typing:start", payload: .object([("room", "r1")]), ackID: nil))
    }

    func testAckID() throws {
        XCTAssertEqual(try event(#"27["message:read",{"room":"r"}]"#).ackID, 7)
    }

    func testMissingPayloadIsNull() throws {
        XCTAssertEqual(try event(#"2["presence:list"]"#).payload, .null)
    }

    func testExtraArgumentsAreIgnored() throws {
        let e = try event(#"2["a:b",{"x":1},"extra",3]"#)
        XCTAssertEqual(e.payload, .object([("x", 1)]))
    }

    func testNonObjectPayloadIsPassedThrough() throws {
        XCTAssertEqual(try event(#"2["a:b",5]"#).payload, .int(5))
    }

    func testShapeErrors() {
        let shape = ProtocolError.invalidPayload("an event is a JSON array whose first element is the event name")
        assertError("2", shape)
        assertError("2[]", shape)
        assertError("2[1]", shape)
        assertError("2[null,\"a:b\"]", shape)
        assertError(#"2{"name":"a:b"}"#, shape)
        assertError(#"2"a:b""#, shape)
    }

    func testOtherPacketTypesAreRefused() {
        let unexpected = ProtocolError.unexpectedPacket("expected an event packet")
        assertError("0", unexpected)
        assertError("1", unexpected)
        assertError(#"31["a:b"]"#, unexpected)
        assertError(#"4{"message":"x"}"#, unexpected)
    }
}
