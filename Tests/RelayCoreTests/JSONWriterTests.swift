import RelayTestSupport
import XCTest
@testable import RelayCore

final class JSONWriterTests: XCTestCase {
    private func roundTrip(_ value: JSONValue, file: StaticString = #filePath, line: UInt = #line) {
        let text = JSONWriter.string(value)
        do {
            let back = try JSONParser.parse(text)
            XCTAssertEqual(back, value, "round trip of \(text)", file: file, line: line)
            // Byte-identical on a second pass: order and formatting are stable.
            XCTAssertEqual(JSONWriter.string(back), text, file: file, line: line)
        } catch {
            XCTFail("writer output \(text) did not parse: \(error)", file: file, line: line)
        }
    }

    func testScalars() {
        XCTAssertEqual(JSONWriter.string(.null), "null")
        XCTAssertEqual(JSONWriter.string(.bool(true)), "true")
        XCTAssertEqual(JSONWriter.string(.bool(false)), "false")
        XCTAssertEqual(JSONWriter.string(.int(0)), "0")
        XCTAssertEqual(JSONWriter.string(.int(-42)), "-42")
        XCTAssertEqual(JSONWriter.string(.int(Int64.max)), "9223372036854775807")
        XCTAssertEqual(JSONWriter.string(.int(Int64.min)), "-9223372036854775808")
        XCTAssertEqual(JSONWriter.string(.string("hi")), #""hi""#)
    }

    func testDoubles() {
        XCTAssertEqual(JSONWriter.string(.double(1.5)), "1.5")
        XCTAssertEqual(JSONWriter.string(.double(-0.25)), "-0.25")
        XCTAssertEqual(JSONWriter.string(.double(0.1)), "0.1")
        // Integral doubles are written without a fraction.
        XCTAssertEqual(JSONWriter.string(.double(2.0)), "2")
        XCTAssertEqual(JSONWriter.string(.double(-3.0)), "-3")
        XCTAssertEqual(JSONWriter.string(.double(-0.0)), "0")
        XCTAssertEqual(JSONWriter.string(.double(123_456_789_012_345)), "123456789012345")
        // From 1e15 up, Swift's own spelling is used; every form is valid JSON.
        XCTAssertEqual(JSONWriter.string(.double(1e15)), "1000000000000000.0")
        XCTAssertEqual(JSONWriter.string(.double(1e20)), "1e+20")
        XCTAssertEqual(JSONWriter.string(.double(1e-7)), "1e-07")
        for d in [1e15, 1e16, 1e20, -1e300, 1e-7, 123.456e-10] {
            XCTAssertEqual(try JSONParser.parse(JSONWriter.string(.double(d))).doubleValue, d)
        }
    }

    func testNonFiniteDoublesBecomeNull() {
        XCTAssertEqual(JSONWriter.string(.double(.nan)), "null")
        XCTAssertEqual(JSONWriter.string(.double(.infinity)), "null")
        XCTAssertEqual(JSONWriter.string(.double(-.infinity)), "null")
        XCTAssertEqual(JSONWriter.string(.array([.double(.nan), .int(1)])), "[null,1]")
    }

    func testCompactContainers() {
        XCTAssertEqual(JSONWriter.string(.array([])), "[]")
        XCTAssertEqual(JSONWriter.string(.object([])), "{}")
        XCTAssertEqual(JSONWriter.string(.array([.int(1), .string("a"), .null])), #"[1,"a",null]"#)
        XCTAssertEqual(
            JSONWriter.string(.object([("b", .int(1)), ("a", .array([.bool(true)]))])),
            #"{"b":1,"a":[true]}"#)
    }

    func testObjectOrderIsPreserved() {
        let v: JSONValue = .object([("z", 1), ("a", 2), ("m", 3)])
        XCTAssertEqual(JSONWriter.string(v), #"{"z":1,"a":2,"m":3}"#)
    }

    func testStringEscapes() {
        XCTAssertEqual(JSONWriter.string(.string("a\"b")), #""a\"b""#)
        XCTAssertEqual(JSONWriter.string(.string("a\\b")), #""a\\b""#)
        XCTAssertEqual(JSONWriter.string(.string("l1\nl2")), #""l1\nl2""#)
        XCTAssertEqual(JSONWriter.string(.string("\r\t")), #""\r\t""#)
        // The slash is not escaped.
        XCTAssertEqual(JSONWriter.string(.string("a/b")), #""a/b""#)
    }

    func testOtherControlCharactersUseLowercaseUnicodeEscapes() {
        XCTAssertEqual(JSONWriter.string(.string("\u{0}")), #""\u0000""#)
        XCTAssertEqual(JSONWriter.string(.string("\u{8}")), #""\u0008""#)
        XCTAssertEqual(JSONWriter.string(.string("\u{C}")), #""\u000c""#)
        XCTAssertEqual(JSONWriter.string(.string("\u{1B}")), #""\u001b""#)
        XCTAssertEqual(JSONWriter.string(.string("\u{1F}")), #""\u001f""#)
        // DEL and everything above 0x1F is written as is.
        XCTAssertEqual(JSONWriter.string(.string("\u{7F} ")), "\"\u{7F} \"")
    }

    func testEveryControlCharacterIsEscaped() {
        for c in 0..<0x20 {
            let s = String(UnicodeScalar(UInt8(c)))
            let bytes = JSONWriter.bytes(.string(s))
            XCTAssertFalse(bytes.contains { $0 < 0x20 }, "raw control byte 0x\(String(c, radix: 16)) in output")
            XCTAssertEqual(try JSONParser.parse(bytes), .string(s))
        }
    }

    func testUnicodeIsWrittenAsUTF8() {
        XCTAssertEqual(JSONWriter.bytes(.string("é")), [0x22, 0xC3, 0xA9, 0x22])
        XCTAssertEqual(JSONWriter.string(.string("✓ 😀 日本")), "\"✓ 😀 日本\"")
        XCTAssertEqual(JSONWriter.string(.string("\u{2028}\u{2029}")), "\"\u{2028}\u{2029}\"")
    }

    func testKeysAreEscapedToo() {
        XCTAssertEqual(JSONWriter.string(.object([("a\"\n", .null)])), #"{"a\"\n":null}"#)
    }

    func testWriteAppendsToExistingBuffer() {
        var out: [UInt8] = Array("prefix:".utf8)
        JSONWriter.write(.array([.int(1)]), into: &out)
        XCTAssertEqual(String(decoding: out, as: UTF8.self), "prefix:[1]")
        var s: [UInt8] = [0x34]
        JSONWriter.writeString("x\"y", into: &s)
        XCTAssertEqual(String(decoding: s, as: UTF8.self), #"4"x\"y""#)
    }

    func testBytesAndStringAgree() {
        let v: JSONValue = ["k": ["é", 1, 2.5, nil, true]]
        XCTAssertEqual(String(decoding: JSONWriter.bytes(v), as: UTF8.self), JSONWriter.string(v))
    }

    // MARK: - Round trips

    func testRoundTripScalars() {
        for v: JSONValue in [.null, true, false, 0, -1, .int(Int64.max), .int(Int64.min), 1.5, -2.75, 1e-7, 1e20, .double(.leastNonzeroMagnitude), 1.7976931348623157e308] {
            roundTrip(v)
        }
    }

    func testRoundTripEscapesAndUnicode() {
        let strings = [
            "", "plain", "quote\"inside", "back\\slash", "tab\tnew\nline\rret", "\u{0}\u{1}\u{1F}",
            "slash/", "é ü ñ", "日本語", "emoji 😀👍🏽👨‍👩‍👧", "\u{10FFFF}", "\u{FEFF}bom", "\u{7F}", "mixed \"\\\n😀\u{1}",
        ]
        for s in strings { roundTrip(.string(s)) }
    }

    func testRoundTripNested() {
        let v: JSONValue = .object([
            ("room", "conversation:42"),
            ("items", .array([1, 2.5, "three", nil, .array([.array([.object([("deep", true)])])])])),
            ("meta", .object([("escaped", "a\"b\\c\n"), ("empty", .object([])), ("list", .array([]))])),
            ("unicode", "héllo 😀"),
            ("neg", -0.5),
        ])
        roundTrip(v)
    }

    func testRoundTripPreservesKeyOrder() throws {
        let text = #"{"z":{"y":1,"b":2},"a":[{"q":1,"c":2}],"m":null}"#
        XCTAssertEqual(JSONWriter.string(try JSONParser.parse(text)), text)
    }

    func testRoundTripGeneratedValues() throws {
        var rng = SplitMix64(seed: 0xC0FFEE)
        let alphabet: [Character] = ["a", "Z", "0", " ", "\"", "\\", "/", "\n", "\t", "\u{1}", "é", "😀", "日", "\u{7F}"]
        func randomString() -> String {
            String((0..<Int.random(in: 0...8, using: &rng)).map { _ in alphabet.randomElement(using: &rng)! })
        }
        func randomValue(depth: Int) -> JSONValue {
            switch Int.random(in: 0...(depth > 4 ? 4 : 6), using: &rng) {
            case 0: return .null
            case 1: return .bool(Bool.random(using: &rng))
            case 2: return .int(Int64.random(in: Int64.min...Int64.max, using: &rng))
            case 3: return .double(Double(Int32.random(in: .min ... .max, using: &rng)) / 1024)
            case 4: return .string(randomString())
            case 5: return .array((0..<Int.random(in: 0...4, using: &rng)).map { _ in randomValue(depth: depth + 1) })
            default:
                return .object((0..<Int.random(in: 0...4, using: &rng)).map { i in (randomString() + "\(i)", randomValue(depth: depth + 1)) })
            }
        }
        for _ in 0..<500 { roundTrip(randomValue(depth: 0)) }
    }
}
