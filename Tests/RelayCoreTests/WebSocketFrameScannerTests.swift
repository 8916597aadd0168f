import XCTest
@testable import RelayCore

final class WebSocketFrameScannerTests: XCTestCase {
    /// A masked client frame header for a payload of `length` bytes.
    private func header(_ length: UInt64, opcode: UInt8 = 0x1) -> [UInt8] {
        var out: [UInt8] = [0x80 | opcode]
        if length < 126 {
            out.append(0x80 | UInt8(length))
        } else if length <= 0xFFFF {
            out += [0x80 | 126, UInt8(length >> 8), UInt8(length & 0xFF)]
        } else {
            out.append(0x80 | 127)
            for shift in stride(from: 56, through: 0, by: -8) { out.append(UInt8((length >> UInt64(shift)) & 0xFF)) }
        }
        return out + [1, 2, 3, 4]
    }

    func testFramesUnderTheLimitPass() {
        var scanner = WebSocketFrameScanner(limit: 1000)
        let stream = header(5) + Array(repeating: 0x41, count: 5) + header(1000) + Array(repeating: 0x42, count: 1000) + header(0)
        XCTAssertEqual(scanner.scan(stream), .ok)
    }

    func testAFrameOverTheLimitIsRefusedAtItsHeader() {
        var scanner = WebSocketFrameScanner(limit: 16 * 1024)
        // Only the header and a little payload have arrived: refused already.
        XCTAssertEqual(scanner.scan(header(1_000_000) + [0, 0, 0]), .tooLarge(declared: 1_000_000))
    }

    func testHeadersSplitAcrossReadsAreFollowed() {
        var scanner = WebSocketFrameScanner(limit: 200)
        let stream = header(100) + Array(repeating: 0, count: 100) + header(70_000)
        var verdicts: [WebSocketFrameScanner.Verdict] = []
        for byte in stream { verdicts.append(scanner.scan([byte])) }
        XCTAssertEqual(verdicts.dropLast(), Array(repeating: .ok, count: stream.count - 1)[...])
        XCTAssertEqual(verdicts.last, .tooLarge(declared: 70_000))
    }

    func testPayloadBytesThatLookLikeHeadersAreSkipped() {
        var scanner = WebSocketFrameScanner(limit: 50)
        // The payload contains what would be a 2^63 length header: it is payload, not a frame.
        let fake: [UInt8] = [0x81, 0xFF, 0x7F, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF]
        XCTAssertEqual(scanner.scan(header(UInt64(fake.count)) + fake + header(3) + [1, 2, 3]), .ok)
    }

    func testLargestDeclaredLengthDoesNotTrap() {
        var scanner = WebSocketFrameScanner(limit: Int.max)
        XCTAssertEqual(scanner.scan(header(UInt64(Int.max))), .ok)
        var fresh = WebSocketFrameScanner(limit: Int.max)
        XCTAssertEqual(fresh.scan(header(UInt64.max)), .tooLarge(declared: UInt64.max))
        var small = WebSocketFrameScanner(limit: -5)
        XCTAssertEqual(small.scan(header(1)), .tooLarge(declared: 1))
    }

    /// The peer's close frame is seen once it is whole, however the bytes are split, and only a
    /// close frame (opcode 8) counts — not one whose payload merely contains a close header.
    func testAWholeCloseFrameIsSeen() {
        let close = header(2, opcode: 0x8) + [0x03, 0xE8]
        var whole = WebSocketFrameScanner(limit: .max)
        XCTAssertEqual(whole.scan(header(3) + [1, 2, 3]), .ok)
        XCTAssertFalse(whole.sawClose)
        _ = whole.scan(close)
        XCTAssertTrue(whole.sawClose)

        var split = WebSocketFrameScanner(limit: .max)
        for byte in close.dropLast() { _ = split.scan([byte]) }
        XCTAssertFalse(split.sawClose, "its payload is not all there")
        _ = split.scan([close.last ?? 0])
        XCTAssertTrue(split.sawClose)

        var empty = WebSocketFrameScanner(limit: .max)
        _ = empty.scan(header(0, opcode: 0x8))
        XCTAssertTrue(empty.sawClose, "a close frame without a body")

        var inside = WebSocketFrameScanner(limit: .max)
        _ = inside.scan(header(UInt64(close.count), opcode: 0x2) + close)
        XCTAssertFalse(inside.sawClose, "a close header inside a binary payload is payload")
        _ = inside.scan(header(1, opcode: 0x9) + [0])
        XCTAssertFalse(inside.sawClose, "a ping is not a close")
    }
}
