import XCTest
@testable import RelayCore

/// The inline header accumulator the frame scanner and the text validator share.
final class WebSocketHeaderBytesTests: XCTestCase {
    private func feed(_ bytes: [UInt8]) -> (WebSocketHeaderBytes, completeAt: Int?) {
        var header = WebSocketHeaderBytes()
        for (index, byte) in bytes.enumerated() where header.append(byte) {
            return (header, index + 1)
        }
        return (header, nil)
    }

    func testEachLengthFormIsCompleteAtItsOwnSize() {
        let key: [UInt8] = [1, 2, 3, 4]
        let short = feed([0x81, 0x85] + key + [9, 9])
        XCTAssertEqual(short.completeAt, 6)
        XCTAssertEqual(short.0.payloadLength, 5)
        XCTAssertTrue(short.0.maskKey == (1, 2, 3, 4))
        let medium = feed([0x82, 0xFE, 0x01, 0x00] + key)
        XCTAssertEqual(medium.completeAt, 8)
        XCTAssertEqual(medium.0.payloadLength, 256)
        XCTAssertEqual(medium.0.opcode, 0x2)
        let long = feed([0x01, 0xFF, 0, 0, 0, 1, 0, 0, 0, 0] + key)
        XCTAssertEqual(long.completeAt, 14)
        XCTAssertEqual(long.0.payloadLength, 1 << 32)
        XCTAssertTrue(long.0.maskKey == (1, 2, 3, 4))
        XCTAssertEqual(long.0.first & 0x80, 0)
    }

    func testUnmaskedHeadersHaveNoKeyAndResetStartsOver() {
        var header = WebSocketHeaderBytes()
        XCTAssertFalse(header.append(0x88))
        XCTAssertTrue(header.append(0x00))
        XCTAssertTrue(header.maskKey == (0, 0, 0, 0))
        XCTAssertEqual(header.opcode, 0x8)
        header.reset()
        XCTAssertFalse(header.append(0x89))
        XCTAssertFalse(header.append(0x7F))
        for _ in 0..<7 { XCTAssertFalse(header.append(0xFF)) }
        XCTAssertTrue(header.append(0xFF))
        XCTAssertEqual(header.payloadLength, .max)
        // Fed past completion without a reset, it stays complete and never writes out of bounds.
        for _ in 0..<20 { XCTAssertTrue(header.append(0)) }
        XCTAssertEqual(header.payloadLength, .max)
    }
}
