import Foundation
import RelayTestSupport
import XCTest
@testable import RelayCore

final class IdentifierTests: XCTestCase {
    func testLookAlikesDifferInNormalization() {
        XCTAssertTrue(Identifier.isNormalized("conversation:caf\u{E9}"))
        XCTAssertFalse(Identifier.isNormalized("conversation:cafe\u{301}"))
        XCTAssertTrue(Identifier.isNormalized("jos\u{E9}"))
        XCTAssertFalse(Identifier.isNormalized("jose\u{301}"))
        // Swift calls them equal; their bytes differ. That is why non-NFC input is refused.
        XCTAssertEqual("jose\u{301}", "jos\u{E9}")
        XCTAssertNotEqual(Array("jose\u{301}".utf8), Array("jos\u{E9}".utf8))
    }

    func testNormalizationEdgeCases() {
        XCTAssertTrue(Identifier.isNormalized(""))
        XCTAssertTrue(Identifier.isNormalized("plain ascii ~!"))
        XCTAssertTrue(Identifier.isNormalized("\u{301}"), "a lone combining mark is NFC")
        XCTAssertTrue(Identifier.isNormalized(":\u{301}x"), "a combining mark that cannot compose is NFC")
        XCTAssertFalse(Identifier.isNormalized("\u{212B}"), "ANGSTROM SIGN maps to U+00C5")
        XCTAssertFalse(Identifier.isNormalized("\u{2126}"), "OHM SIGN maps to U+03A9")
        XCTAssertFalse(Identifier.isNormalized("x\u{301}\u{323}"), "combining marks out of canonical order")
        XCTAssertTrue(Identifier.isNormalized("x\u{323}\u{301}"))
        XCTAssertFalse(Identifier.isNormalized("\u{1100}\u{1161}"), "conjoining jamo compose to a Hangul syllable")
        XCTAssertTrue(Identifier.isNormalized("\u{AC00}"))
        XCTAssertTrue(Identifier.isNormalized("\u{FB01}"), "compatibility characters are NFC (NFKC would change them)")
        XCTAssertTrue(Identifier.isNormalized("😀👍🏽"))
        XCTAssertFalse(Identifier.isNormalized("a\u{0344}"), "U+0344 decomposes and is excluded from composition")
    }

    func testAgreesWithFoundation() {
        let scalars: [UInt32] = [
            0x41, 0x65, 0x301, 0x323, 0x308, 0xE9, 0x212B, 0xC5, 0x1100, 0x1161, 0x11A8, 0xAC00, 0x344, 0x958, 0x915, 0x93C,
            0xFB01, 0x3099, 0x304B, 0x1F600, 0x1E0A, 0x307, 0x327, 0x5D0, 0x5B7,
        ]
        var rng = SplitMix64(seed: 3)
        for _ in 0..<5000 {
            var s = ""
            for _ in 0..<Int.random(in: 1...6, using: &rng) {
                if let u = Unicode.Scalar(scalars[Int.random(in: 0..<scalars.count, using: &rng)]) { s.unicodeScalars.append(u) }
            }
            // NFC by its definition: canonical decomposition, then canonical composition. (Composing
            // directly with Foundation is wrong for a precomposed LV syllable followed by a trailing
            // jamo; see testHangulLVPlusTrailingConsonantIsNotNFC.)
            let nfc = s.decomposedStringWithCanonicalMapping.precomposedStringWithCanonicalMapping
            let reference = Array(nfc.utf8) == Array(s.utf8)
            XCTAssertEqual(Identifier.isNormalized(s), reference, s.unicodeScalars.map { String($0.value, radix: 16) }.joined(separator: " "))
        }
    }

    /// U+AC00 (LV syllable) + U+11A8 (trailing consonant) composes to U+AC01, and Swift's `==`
    /// says so. Foundation's `precomposedStringWithCanonicalMapping` on Linux (this toolchain)
    /// leaves the pair as it is, so an NFC check built on it would let a look-alike of `각` through.
    func testHangulLVPlusTrailingConsonantIsNotNFC() {
        let decomposedTail = "\u{AC00}\u{11A8}"
        XCTAssertEqual(decomposedTail, "\u{AC01}")
        XCTAssertFalse(Identifier.isNormalized(decomposedTail))
        XCTAssertTrue(Identifier.isNormalized("\u{AC01}"))
        XCTAssertFalse(RoomAuthorization(patterns: ["room:\u{AC01}"]).allows("room:" + decomposedTail))
    }

    func testIsValid() {
        XCTAssertTrue(Identifier.isValid("alice", maxBytes: 5))
        XCTAssertFalse(Identifier.isValid("alice", maxBytes: 4))
        XCTAssertFalse(Identifier.isValid("", maxBytes: 10))
        XCTAssertTrue(Identifier.isValid("caf\u{E9}", maxBytes: 5), "é is 2 bytes")
        XCTAssertFalse(Identifier.isValid("caf\u{E9}", maxBytes: 4))
        XCTAssertFalse(Identifier.isValid("cafe\u{301}", maxBytes: 100))
        XCTAssertTrue(Identifier.isValid("with space", maxBytes: 100))
        for control in ["\u{0}", "\u{9}", "\u{A}", "\u{1F}", "\u{7F}", "\u{80}", "\u{85}", "\u{9F}"] {
            XCTAssertFalse(Identifier.isValid("a\(control)b", maxBytes: 100), control.debugDescription)
        }
        XCTAssertTrue(Identifier.isValid("a\u{A0}b", maxBytes: 100), "NO-BREAK SPACE is not a control")
        XCTAssertTrue(Identifier.isValid("\u{100}\u{17F}", maxBytes: 100), "C4 80 / C5 BF are not C1")
    }
}
