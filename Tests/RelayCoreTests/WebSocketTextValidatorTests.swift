import XCTest
@testable import RelayCore

/// UTF-8 of text messages checked as the bytes arrive: fragments, TCP chops, masks, control
/// frames in between, and the messages that are not checked here.
final class WebSocketTextValidatorTests: XCTestCase {
    /// One masked client frame.
    func frame(_ opcode: UInt8, _ payload: [UInt8], fin: Bool = true, rsv1: Bool = false, mask: [UInt8] = [0x37, 0xFA, 0x21, 0x3D]) -> [UInt8] {
        var out: [UInt8] = [(fin ? 0x80 : 0) | (rsv1 ? 0x40 : 0) | opcode]
        switch payload.count {
        case 0..<126: out.append(0x80 | UInt8(payload.count))
        case 126...0xFFFF: out += [0x80 | 126, UInt8(payload.count >> 8), UInt8(payload.count & 0xFF)]
        default:
            out.append(0x80 | 127)
            for shift in stride(from: 56, through: 0, by: -8) { out.append(UInt8((payload.count >> shift) & 0xFF)) }
        }
        out += mask
        for (i, byte) in payload.enumerated() { out.append(byte ^ mask[i % 4]) }
        return out
    }

    func scan(_ v: inout WebSocketTextValidator, _ bytes: [UInt8]) -> WebSocketTextValidator.Verdict {
        bytes.withUnsafeBytes { v.scan($0) }
    }

    /// Feeds `bytes` in chops of `size`; the index of the chop that was refused, if any.
    func refusedChop(_ bytes: [UInt8], size: Int) -> Int? {
        var v = WebSocketTextValidator()
        var chop = 0
        var i = 0
        while i < bytes.count {
            if scan(&v, Array(bytes[i..<min(bytes.count, i + size)])) == .invalidUTF8 { return chop }
            i += size
            chop += 1
        }
        return nil
    }

    func testValidTextInAnyChopsAndFragments() {
        let text = Array("κόσμε – naïve 𝄞 ok".utf8)
        let whole = frame(0x1, text)
        let fragmented = frame(0x1, Array(text[0..<5]), fin: false) + frame(0x9, [1, 2]) + frame(0x0, Array(text[5..<9]), fin: false) + frame(0x0, Array(text[9...]))
        for size in 1...whole.count {
            XCTAssertNil(refusedChop(whole, size: size), "chops of \(size)")
            XCTAssertNil(refusedChop(fragmented, size: size), "fragmented, chops of \(size)")
        }
        XCTAssertNil(refusedChop(frame(0x1, []), size: 1), "an empty text message")
    }

    func testAnInvalidFragmentIsRefusedBeforeTheMessageEnds() {
        // Autobahn 6.4.1: κόσμε, then f4 90 80 80 (above U+10FFFF), then more.
        let first = frame(0x1, Array("κόσμε".utf8), fin: false)
        let bad = frame(0x0, [0xF4, 0x90, 0x80, 0x80], fin: false)
        let last = frame(0x0, Array("edited".utf8))
        var v = WebSocketTextValidator()
        XCTAssertEqual(scan(&v, first), .ok)
        XCTAssertEqual(scan(&v, bad), .invalidUTF8, "at the bad fragment, not after the last one")
        _ = last
    }

    func testAnInvalidByteInOneChoppedFrameIsRefusedInItsChop() {
        // Autobahn 6.4.3: one frame in three TCP chops; the second carries the bad byte.
        let payload = Array("κόσμε".utf8) + [0xF4, 0x90, 0x80, 0x80] + Array("edited".utf8)
        let bytes = frame(0x1, payload)
        let headerBytes = 6
        let chops = [Array(bytes[0..<(headerBytes + 10)]), Array(bytes[(headerBytes + 10)..<(headerBytes + 14)]), Array(bytes[(headerBytes + 14)...])]
        var v = WebSocketTextValidator()
        XCTAssertEqual(scan(&v, chops[0]), .ok)
        XCTAssertEqual(scan(&v, chops[1]), .invalidUTF8)
    }

    func testTheRulesOfUTF8() {
        let invalid: [[UInt8]] = [
            [0xC0, 0xAF], [0xE0, 0x80, 0xAF], [0xF0, 0x80, 0x80, 0xAF],  // overlong
            [0xED, 0xA0, 0x80],  // a surrogate
            [0xF4, 0x90, 0x80, 0x80], [0xF5], [0xFF],  // above U+10FFFF, never bytes
            [0x80], [0xC3, 0x28],  // a stray continuation, a missing one
        ]
        for bytes in invalid { XCTAssertNotNil(refusedChop(frame(0x1, bytes), size: 1), "\(bytes)") }
        XCTAssertNotNil(refusedChop(frame(0x1, [0x61, 0xE2, 0x82]), size: 64), "a message ending mid-character")
        let valid: [[UInt8]] = [[0xED, 0x9F, 0xBF], [0xEE, 0x80, 0x80], [0xF4, 0x8F, 0xBF, 0xBF], [0xF0, 0x90, 0x80, 0x80], [0xE0, 0xA0, 0x80]]
        for bytes in valid { XCTAssertNil(refusedChop(frame(0x1, bytes), size: 1), "\(bytes)") }
    }

    func testWhatIsNotCheckedHere() {
        XCTAssertNil(refusedChop(frame(0x2, [0xFF, 0xFE]), size: 3), "binary")
        XCTAssertNil(refusedChop(frame(0x1, [0xFF, 0xFE], rsv1: true), size: 3), "compressed: checked after inflating")
        XCTAssertNil(refusedChop(frame(0x8, [0x03, 0xE8, 0xFF]), size: 3), "a close reason: the frame reader checks it")
        // A character split across fragments with a ping between them.
        let split = frame(0x1, [0xE2, 0x82], fin: false) + frame(0xA, [0xFF]) + frame(0x0, [0xAC])
        XCTAssertNil(refusedChop(split, size: 1))
        // The next message starts clean after a binary one.
        XCTAssertNil(refusedChop(frame(0x2, [0xE2], fin: false) + frame(0x0, [0x82]) + frame(0x1, Array("ok".utf8)), size: 2))
    }

    func testLongFramesWithExtendedLengths() {
        let text = Array(String(repeating: "é", count: 40_000).utf8)  // 80 000 bytes: a 64-bit length
        XCTAssertNil(refusedChop(frame(0x1, text), size: 1500))
        var bad = Array(String(repeating: "a", count: 300).utf8)
        bad[299] = 0xC3
        XCTAssertNotNil(refusedChop(frame(0x1, bad), size: 100), "16-bit length, truncated at the end")
    }
}
