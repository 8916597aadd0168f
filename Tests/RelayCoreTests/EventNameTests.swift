import Foundation
import RelayTestSupport
import XCTest
@testable import RelayCore

final class EventNameTests: XCTestCase {
    static let pattern = "^[a-z0-9]+(-[a-z0-9]+)*:[a-z0-9]+(-[a-z0-9]+)*$"

    func testValidNames() {
        for name in [
            "typing:start", "typing:stop", "location:share-live", "a1:b2-c3", "a:b", "0:9", "room:join",
            "message:read", "x-y-z:a-b-c", "abc123:def456", "a-1:2-b", "entity:action-word-long-name",
        ] {
            XCTAssertTrue(EventName.isValid(name), name)
        }
    }

    func testInvalidNames() {
        for name in [
            "", ":", "Typing:start", "typing:Start", "TYPING:START", "typing_start", "typing:start_now", "typing:",
            ":start", "a::b", "a:b:c", "a--b:c", "a:b--c", "-a:b", "a-:b", "a:-b", "a:b-", "typing start",
            "typing:start ", " typing:start", "typing", "error", "typing.start", "typing/start", "a:b\n", "a:b\0",
            "tÿping:start", "typing:stårt", "ｔyping:start", "typing:start😀", "a\u{301}:b", "a:b\t", "a+b:c",
        ] {
            XCTAssertFalse(EventName.isValid(name), "\(name.debugDescription) should be invalid")
        }
    }

    func testLengthLimit() {
        XCTAssertEqual(EventName.maxLength, 64)
        let exactly64 = String(repeating: "a", count: 31) + ":" + String(repeating: "b", count: 32)
        XCTAssertEqual(exactly64.utf8.count, 64)
        XCTAssertTrue(EventName.isValid(exactly64))
        let tooLong = exactly64 + "b"
        XCTAssertFalse(EventName.isValid(tooLong))
        XCTAssertFalse(EventName.isValid(String(repeating: "a-", count: 500) + "a:b"))
    }

    func testByteCollectionOverload() {
        XCTAssertTrue(EventName.isValid(Array("typing:start".utf8)))
        XCTAssertTrue(EventName.isValid(ArraySlice("xxa:b".utf8).dropFirst(2)))
        XCTAssertFalse(EventName.isValid([UInt8]()))
        XCTAssertFalse(EventName.isValid(Array("a:b:c".utf8)))
        XCTAssertFalse(EventName.isValid([UInt8(ascii: "a"), UInt8(ascii: ":"), 0xC3, 0xA9]))
    }

    func testNonContiguousStringsAreChecked() {
        // A bridged/lazy string path: build the name from a substring so storage is shared.
        let source = "prefix typing:start suffix"
        let sub = source.split(separator: " ")[1]
        XCTAssertTrue(EventName.isValid(String(sub)))
        XCTAssertTrue(EventName.isValid(sub.utf8))
    }

    /// Compares the hand-written checker with the regular expression on many generated strings.
    func testMatchesRegularExpression() throws {
        let regex = try NSRegularExpression(pattern: Self.pattern)
        func regexSays(_ s: String) -> Bool {
            let range = NSRange(s.startIndex..., in: s)
            return regex.firstMatch(in: s, options: [], range: range) != nil && s.utf8.count <= EventName.maxLength
        }
        // Biased towards the grammar's own characters so that many generated names are valid.
        let alphabet: [Character] = [
            "a", "b", "z", "0", "9", "-", "-", ":", ":", "a", "m", "5", "_", "A", "Z", " ", ".", "é", "😀", "\u{0}", "/", "+",
        ]
        var rng = SplitMix64(seed: 0x5EED_1234)
        var valid = 0
        var checked = 0
        func check(_ s: String) {
            checked += 1
            let expected = regexSays(s)
            if expected { valid += 1 }
            XCTAssertEqual(EventName.isValid(s), expected, "mismatch for \(s.debugDescription)")
        }
        for _ in 0..<20_000 {
            let length = Int.random(in: 0...70, using: &rng)
            check(String((0..<length).map { _ in alphabet.randomElement(using: &rng)! }))
        }
        // Structured candidates: words joined by hyphens around colons, with occasional mutations.
        let wordChars = Array("abcxyz0189")
        for _ in 0..<20_000 {
            var parts: [String] = []
            for _ in 0..<Int.random(in: 1...3, using: &rng) {
                let words = (0..<Int.random(in: 0...3, using: &rng)).map { _ in
                    String((0..<Int.random(in: 0...6, using: &rng)).map { _ in wordChars.randomElement(using: &rng)! })
                }
                parts.append(words.joined(separator: Bool.random(using: &rng) ? "-" : "--"))
            }
            var s = parts.joined(separator: ":")
            if Int.random(in: 0..<8, using: &rng) == 0, !s.isEmpty {
                let i = s.index(s.startIndex, offsetBy: Int.random(in: 0..<s.count, using: &rng))
                s.replaceSubrange(i...i, with: String(alphabet.randomElement(using: &rng)!))
            }
            check(s)
        }
        // Enumerate every string up to length 5 over a tiny alphabet.
        let tiny: [Character] = ["a", "0", "-", ":", "_"]
        var frontier = [""]
        for _ in 0..<5 {
            frontier = frontier.flatMap { prefix in tiny.map { prefix + String($0) } }
            frontier.forEach(check)
        }
        XCTAssertGreaterThan(checked, 40_000)
        XCTAssertGreaterThan(valid, 500, "the generator should produce plenty of valid names too")
    }
}
