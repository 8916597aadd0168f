import RelayTestSupport
import XCTest
@testable import RelayCore

/// Parses and asserts the specific `JSONError`.
func assertJSONError(
    _ text: String, _ expected: JSONError, maxDepth: Int = JSONParser.defaultMaxDepth,
    file: StaticString = #filePath, line: UInt = #line
) {
    assertJSONError(Array(text.utf8), expected, maxDepth: maxDepth, file: file, line: line)
}

func assertJSONError(
    _ bytes: [UInt8], _ expected: JSONError, maxDepth: Int = JSONParser.defaultMaxDepth,
    file: StaticString = #filePath, line: UInt = #line
) {
    do {
        let value = try JSONParser.parse(bytes, maxDepth: maxDepth)
        XCTFail("expected \(expected), parsed \(value)", file: file, line: line)
    } catch {
        XCTAssertEqual(error, expected, file: file, line: line)
    }
}

/// Decodes a Socket.IO packet from text and asserts the specific `ProtocolError`.
func assertSocketError(
    _ text: String, _ expected: ProtocolError, maxDepth: Int = JSONParser.defaultMaxDepth,
    file: StaticString = #filePath, line: UInt = #line
) {
    do {
        let packet = try SocketPacket.decode(ArraySlice(text.utf8), maxDepth: maxDepth)
        XCTFail("expected \(expected), decoded \(packet)", file: file, line: line)
    } catch {
        XCTAssertEqual(error, expected, file: file, line: line)
    }
}

/// Asserts that `body` throws a `RelayError` with `code`.
func assertRelayError<T>(
    _ code: RelayErrorCode, file: StaticString = #filePath, line: UInt = #line,
    _ body: () throws(RelayError) -> T
) {
    do {
        let value = try body()
        XCTFail("expected \(code.rawValue), got \(value)", file: file, line: line)
    } catch {
        XCTAssertEqual(error.code, code, file: file, line: line)
    }
}

func ascii(_ c: Character) -> UInt8 { c.asciiValue! }
