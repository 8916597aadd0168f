import Foundation
import RelayTestSupport
import XCTest
@testable import RelayCore

final class WebSocketKeyTests: XCTestCase {
    func testRFCSampleKeyIsValid() {
        XCTAssertTrue(WebSocketKey.isValid("dGhlIHNhbXBsZSBub25jZQ=="))  // RFC 6455 §1.3
        XCTAssertTrue(WebSocketKey.isValid(" \tdGhlIHNhbXBsZSBub25jZQ== \t"), "optional whitespace is trimmed")
    }

    func testNonZeroPaddingBitsAreAccepted() {
        // "Q" ends in bits 0000; "R" sets one of the unused bits. Both decode to 16 bytes.
        XCTAssertTrue(WebSocketKey.isValid("dGhlIHNhbXBsZSBub25jZR=="))
        XCTAssertTrue(WebSocketKey.isValid("AAAAAAAAAAAAAAAAAAAAA/=="))
        XCTAssertTrue(WebSocketKey.isValid("+/+/+/+/+/+/+/+/+/+/+/=="))
    }

    func testInvalidKeys() {
        for key in [
            "", "dGhlIHNhbXBsZSBub25jZQ=", "dGhlIHNhbXBsZSBub25jZQ===", "dGhlIHNhbXBsZSBub25jZQ", "dGhlIHNhbXBsZSBub25jZQ==x",
            "dGhlIHNhbXBsZSBub25jZ===", "dGhlIHNhbXBsZSBub25jZQ-=", "dGhlIHNhbXBsZSBub25j-Q==", "dGhlIHNhbXBsZSBub25j_Q==",
            "dGhlIHNhbXBsZSBub25jZQA=", "dGhlIHNhbXBsZSBub 25jZQ==", "dGhlIHNhbXBsZSBub25jZQ==\r", "\ndGhlIHNhbXBsZSBub25jZQ==",
            "AAAAAAAAAAAAAAAAAAAAAAAA", "YWJjZGVmZ2hpamtsbW5vcHFy", "dGhlIHNhbXBsZSBub25jZé==",
        ] {
            XCTAssertFalse(WebSocketKey.isValid(key), key.debugDescription)
        }
    }

    /// Agrees with Foundation's decoder on every 16-byte value's encoding and on mutations of it.
    func testAgreesWithFoundation() {
        var rng = SplitMix64(seed: 16)
        for _ in 0..<2000 {
            let bytes = (0..<16).map { _ in UInt8.random(in: 0...255, using: &rng) }
            let key = Data(bytes).base64EncodedString()
            XCTAssertTrue(WebSocketKey.isValid(key), key)
            var mutated = Array(key.utf8)
            mutated[Int.random(in: 0..<mutated.count, using: &rng)] = UInt8.random(in: 0x21...0x7E, using: &rng)
            let text = String(decoding: mutated, as: UTF8.self)
            let reference = Data(base64Encoded: text, options: [.ignoreUnknownCharacters]).map { $0.count == 16 && text.utf8.allSatisfy { WebSocketKey.isBase64Alphabet($0) || $0 == UInt8(ascii: "=") } }
            if WebSocketKey.isValid(text) {
                XCTAssertEqual(Data(base64Encoded: text)?.count, 16, text)
            } else {
                XCTAssertNotEqual(reference, true, text)
            }
        }
    }
}
