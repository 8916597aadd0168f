import XCTest
@testable import RelayCore

final class JSONParserTests: XCTestCase {
    private func parse(_ text: String, file: StaticString = #filePath, line: UInt = #line) -> JSONValue? {
        do { return try JSONParser.parse(text) } catch {
            XCTFail("unexpected \(error) for \(text)", file: file, line: line)
            return nil
        }
    }

    // MARK: - Scalars

    func testLiterals() {
        XCTAssertEqual(parse("null"), .null)
        XCTAssertEqual(parse("true"), .bool(true))
        XCTAssertEqual(parse("false"), .bool(false))
    }

    func testIntegers() {
        XCTAssertEqual(parse("0"), .int(0))
        XCTAssertEqual(parse("-0"), .int(0))
        XCTAssertEqual(parse("42"), .int(42))
        XCTAssertEqual(parse("-17"), .int(-17))
        XCTAssertEqual(parse("9223372036854775807"), .int(Int64.max))
        XCTAssertEqual(parse("-9223372036854775808"), .int(Int64.min))
        guard case .int? = parse("123") else { return XCTFail("integers parse as .int") }
    }

    func testIntegerOverflowFallsBackToDouble() {
        guard case .double(let d)? = parse("9223372036854775808") else { return XCTFail("expected a double") }
        XCTAssertEqual(d, 9223372036854775808.0)
    }

    func testFractionsAndExponents() {
        XCTAssertEqual(parse("1.5"), .double(1.5))
        XCTAssertEqual(parse("-0.25"), .double(-0.25))
        XCTAssertEqual(parse("1e3"), .double(1000))
        XCTAssertEqual(parse("1E3"), .double(1000))
        XCTAssertEqual(parse("2.5e-3"), .double(0.0025))
        XCTAssertEqual(parse("2.5E+2"), .double(250))
        XCTAssertEqual(parse("0.0"), .double(0))
        guard case .double? = parse("1.0") else { return XCTFail("a number with a fraction is a .double") }
        guard case .double? = parse("1e0") else { return XCTFail("a number with an exponent is a .double") }
    }

    func testStrings() {
        XCTAssertEqual(parse(#""""#), .string(""))
        XCTAssertEqual(parse(#""hello""#), .string("hello"))
        XCTAssertEqual(parse(#""héllo wörld ✓ 😀""#), .string("héllo wörld ✓ 😀"))
    }

    func testEscapes() {
        XCTAssertEqual(parse(#""\"\\\/\b\f\n\r\t""#), .string("\"\\/\u{08}\u{0C}\n\r\t"))
        XCTAssertEqual(parse(#""a\nb""#), .string("a\nb"))
        XCTAssertEqual(parse(#""pre \"quoted\" post""#), .string("pre \"quoted\" post"))
    }

    func testUnicodeEscapes() {
        XCTAssertEqual(parse(#""\u0041""#), .string("A"))
        XCTAssertEqual(parse(#""\u00e9\u00E9""#), .string("éé"))
        XCTAssertEqual(parse(#""\u20AC""#), .string("€"))
        XCTAssertEqual(parse(#""\u0000""#), .string("\u{0}"))
        XCTAssertEqual(parse(#""\uD83D\uDE00""#), .string("😀"))
        XCTAssertEqual(parse(#""x\ud83d\ude00y""#), .string("x😀y"))
        XCTAssertEqual(parse(#""\uDBFF\uDFFF""#), .string("\u{10FFFF}"))
    }

    // MARK: - Containers

    func testEmptyContainers() {
        XCTAssertEqual(parse("[]"), .array([]))
        XCTAssertEqual(parse("{}"), .object([]))
        XCTAssertEqual(parse(" [ ] "), .array([]))
        XCTAssertEqual(parse(" { } "), .object([]))
    }

    func testNested() {
        let v = parse(#"{"a":[1,2,{"b":null}],"c":{"d":true,"e":"x"}}"#)
        XCTAssertEqual(v?["a"], .array([.int(1), .int(2), .object([("b", .null)])]))
        XCTAssertEqual(v?["c"]?["d"], .bool(true))
        XCTAssertEqual(v?["c"]?["e"], .string("x"))
    }

    func testObjectKeepsArrivalOrder() throws {
        let v = try JSONParser.parse(#"{"z":1,"a":2,"m":3}"#)
        guard case .object(let pairs) = v else { return XCTFail("expected an object") }
        XCTAssertEqual(pairs.map(\.0), ["z", "a", "m"])
    }

    func testDuplicateKeysAreRefused() throws {
        assertJSONError(#"{"a":1,"a":2}"#, .duplicateKey(offset: 7))
        assertJSONError(#"{ "a" : 1 , "b":2, "a" : 1 }"#, .duplicateKey(offset: 19))
        assertJSONError(#"{"x":{"k":1,"k":[]}}"#, .duplicateKey(offset: 12))
        // An escaped spelling of the same key is the same key.
        assertJSONError(#"{"a":1,"\u0061":2}"#, .duplicateKey(offset: 7))
        // Keys compare as Swift Strings: canonically equivalent spellings are duplicates too.
        assertJSONError(#"{"caf\u00e9":1,"cafe\u0301":2}"#, .duplicateKey(offset: 15))
        // The same key in different objects is fine.
        let v = try JSONParser.parse(#"{"a":{"a":1},"b":[{"a":2},{"a":3}]}"#)
        XCTAssertEqual(v["a"], ["a": 1])
    }

    func testDuplicateKeysInLargeObjectsAreRefused() throws {
        // Past the linear-scan limit the parser switches to a Set; check both sides of it.
        for count in [7, 8, 9, 10, 40] {
            let keys = (0..<count).map { "\"k\($0)\":\($0)" }
            let ok = "{" + keys.joined(separator: ",") + "}"
            guard case .object(let pairs) = try JSONParser.parse(ok) else { return XCTFail("expected an object") }
            XCTAssertEqual(pairs.count, count)
            for repeated in [0, count / 2, count - 1] {
                let bad = "{" + keys.joined(separator: ",") + ",\"k\(repeated)\":0}"
                let offset = ok.utf8.count  // the repeated key's quote replaces the closing brace, after a comma
                assertJSONError(bad, .duplicateKey(offset: offset))
            }
        }
    }

    func testWhitespaceEverywhere() {
        let v = parse(" \t\r\n{ \"a\" :\n[ 1 ,\t2 ] , \"b\" : \"c\" }\n ")
        XCTAssertEqual(v, .object([("a", .array([.int(1), .int(2)])), ("b", .string("c"))]))
    }

    func testParseFromBytesAndBufferAgree() throws {
        let text = #"{"k":[1.5,"v",false]}"#
        let fromString = try JSONParser.parse(text)
        let fromBytes = try JSONParser.parse(Array(text.utf8))
        let fromBuffer = try Array(text.utf8).withUnsafeBufferPointer { buf in
            try Result { () throws(JSONError) in try JSONParser.parse(buf) }.get()
        }
        XCTAssertEqual(fromString, fromBytes)
        XCTAssertEqual(fromString, fromBuffer)
    }

    // MARK: - Structural errors

    func testEmptyInput() {
        assertJSONError("", .unexpectedEnd)
        assertJSONError("   \n\t", .unexpectedEnd)
    }

    func testTruncatedInput() {
        assertJSONError("[", .unexpectedEnd)
        assertJSONError("[1", .unexpectedEnd)
        assertJSONError("[1,", .unexpectedEnd)
        assertJSONError("{", .unexpectedEnd)
        assertJSONError(#"{"a""#, .unexpectedEnd)
        assertJSONError(#"{"a":"#, .unexpectedEnd)
        assertJSONError(#"{"a":1"#, .unexpectedEnd)
        assertJSONError(#""abc"#, .unexpectedEnd)
        assertJSONError(#""ab\"#, .unexpectedEnd)
        assertJSONError(#""ab\n"#, .unexpectedEnd)
        assertJSONError("tru", .unexpectedEnd)
        assertJSONError("nul", .unexpectedEnd)
        assertJSONError("-", .unexpectedEnd)
        assertJSONError(#""\u12"#, .unexpectedEnd)
    }

    func testUnexpectedBytes() {
        assertJSONError("x", .unexpectedByte(ascii("x"), offset: 0))
        assertJSONError("  @", .unexpectedByte(ascii("@"), offset: 2))
        assertJSONError("trux", .unexpectedByte(ascii("x"), offset: 3))
        assertJSONError("nulL", .unexpectedByte(ascii("L"), offset: 3))
        assertJSONError("fals3", .unexpectedByte(ascii("3"), offset: 4))
        assertJSONError("[1,]", .unexpectedByte(ascii("]"), offset: 3))
        assertJSONError("[,1]", .unexpectedByte(ascii(","), offset: 1))
        assertJSONError("[1 2]", .unexpectedByte(ascii("2"), offset: 3))
        assertJSONError("[1}", .unexpectedByte(ascii("}"), offset: 2))
        assertJSONError(#"{"a":1,}"#, .unexpectedByte(ascii("}"), offset: 7))
        assertJSONError(#"{"a" 1}"#, .unexpectedByte(ascii("1"), offset: 5))
        assertJSONError(#"{a:1}"#, .unexpectedByte(ascii("a"), offset: 1))
        assertJSONError(#"{1:1}"#, .unexpectedByte(ascii("1"), offset: 1))
        assertJSONError(#"{"a":1]"#, .unexpectedByte(ascii("]"), offset: 6))
        assertJSONError("'a'", .unexpectedByte(ascii("'"), offset: 0))
        assertJSONError("+1", .unexpectedByte(ascii("+"), offset: 0))
        assertJSONError(".5", .unexpectedByte(ascii("."), offset: 0))
        assertJSONError("NaN", .unexpectedByte(ascii("N"), offset: 0))
        assertJSONError("Infinity", .unexpectedByte(ascii("I"), offset: 0))
    }

    func testTrailingBytes() {
        assertJSONError("1 2", .trailingBytes(offset: 2))
        assertJSONError("{} x", .trailingBytes(offset: 3))
        assertJSONError("[]]", .trailingBytes(offset: 2))
        assertJSONError(#""a""b""#, .trailingBytes(offset: 3))
        assertJSONError("null,", .trailingBytes(offset: 4))
        // A leading zero ends the number; the digit after it is left over.
        assertJSONError("01", .trailingBytes(offset: 1))
        assertJSONError("-012", .trailingBytes(offset: 2))
    }

    func testNonBreakingSpaceIsNotWhitespace() {
        assertJSONError("1\u{A0}", .trailingBytes(offset: 1))
        assertJSONError("\u{A0}1", .unexpectedByte(0xC2, offset: 0))
    }

    // MARK: - Numbers

    func testBadNumbers() {
        assertJSONError("-a", .invalidNumber(offset: 0))
        assertJSONError("--1", .invalidNumber(offset: 0))
        assertJSONError("1.", .invalidNumber(offset: 0))
        assertJSONError("1.e5", .invalidNumber(offset: 0))
        assertJSONError("1e", .invalidNumber(offset: 0))
        assertJSONError("1e+", .invalidNumber(offset: 0))
        assertJSONError("1E-", .invalidNumber(offset: 0))
        assertJSONError("-.5", .invalidNumber(offset: 0))
        assertJSONError("[1, 2.]", .invalidNumber(offset: 4))
        assertJSONError(#"{"n":-}"#, .invalidNumber(offset: 5))
    }

    func testNumbersOutOfDoubleRangeAreRefused() {
        assertJSONError("1e400", .invalidNumber(offset: 0))
        assertJSONError("-1e400", .invalidNumber(offset: 0))
        assertJSONError("[0, 1" + String(repeating: "0", count: 400) + ".0]", .invalidNumber(offset: 4))
    }

    func testTinyNumberUnderflowsToZeroOrSubnormal() throws {
        XCTAssertEqual(try JSONParser.parse("5e-324").doubleValue, Double.leastNonzeroMagnitude)
        XCTAssertEqual(try JSONParser.parse("1e-400").doubleValue, 0)
    }

    // MARK: - Strings

    func testControlCharactersInStringsAreRefused() {
        assertJSONError("\"a\nb\"", .controlCharacterInString(offset: 2))
        assertJSONError("\"\t\"", .controlCharacterInString(offset: 1))
        assertJSONError([0x22, 0x00, 0x22], .controlCharacterInString(offset: 1))
        assertJSONError([0x22, 0x61, 0x1F, 0x22], .controlCharacterInString(offset: 2))
        // After an escape (the slow path) too.
        assertJSONError("\"\\n\u{01}\"", .controlCharacterInString(offset: 3))
        // DEL is not a control character for JSON.
        XCTAssertEqual(try JSONParser.parse([0x22, 0x7F, 0x22]), .string("\u{7F}"))
    }

    func testInvalidEscapes() {
        assertJSONError(#""\x""#, .invalidEscape(offset: 2))
        assertJSONError(#""ab\'""#, .invalidEscape(offset: 4))
        assertJSONError(#""\a""#, .invalidEscape(offset: 2))
        assertJSONError(#""\U0041""#, .invalidEscape(offset: 2))
        assertJSONError(#""\u00G1""#, .invalidEscape(offset: 5))
        assertJSONError(#""\uZZZZ""#, .invalidEscape(offset: 3))
        assertJSONError(#""\u-123""#, .invalidEscape(offset: 3))
    }

    func testLoneHighSurrogateIsRefused() {
        // "\uD800" then the closing quote
        assertJSONError(#""\uD800""#, .invalidUnicode(offset: 7))
        assertJSONError(#""\uD83Dx""#, .invalidUnicode(offset: 7))
        // A high surrogate followed by an escape that is not \u.
        assertJSONError(#""\uD83D\n""#, .invalidUnicode(offset: 7))
        // At the very end of the input.
        assertJSONError(#""\uD83D"#, .invalidUnicode(offset: 7))
    }

    func testHighSurrogateFollowedByNonLowSurrogateIsRefused() {
        assertJSONError(#""\uD83D\u0041""#, .invalidUnicode(offset: 13))
        assertJSONError(#""\uD83D\uD83D""#, .invalidUnicode(offset: 13))
    }

    func testLoneLowSurrogateIsRefused() {
        assertJSONError(#""\uDC00""#, .invalidUnicode(offset: 7))
        assertJSONError(#""\uDFFF""#, .invalidUnicode(offset: 7))
        assertJSONError(#""\uDE00\uD83D""#, .invalidUnicode(offset: 7))
    }

    func testInvalidUTF8IsRefused() {
        // Fast path (no escapes): the offset is the first byte of the string's contents.
        assertJSONError([0x22, 0xFF, 0x22], .invalidUnicode(offset: 1))
        assertJSONError([0x22, 0x61, 0xC3, 0x22], .invalidUnicode(offset: 1))  // truncated 2-byte sequence
        assertJSONError([0x22, 0xC0, 0xAF, 0x22], .invalidUnicode(offset: 1))  // overlong "/"
        assertJSONError([0x22, 0xED, 0xA0, 0x80, 0x22], .invalidUnicode(offset: 1))  // UTF-8 encoded surrogate
        // Slow path (with an escape).
        assertJSONError([0x22, 0x5C, 0x6E, 0xFF, 0x22], .invalidUnicode(offset: 1))
        // As an object key.
        assertJSONError([0x7B, 0x22, 0xFE, 0x22, 0x3A, 0x31, 0x7D], .invalidUnicode(offset: 2))
        // Valid multibyte UTF-8 passes.
        XCTAssertEqual(try JSONParser.parse([0x22, 0xC3, 0xA9, 0x22]), .string("é"))
        // ASCII (taken as it is, without the standard library's validation) up to 0x7F; one
        // byte over it anywhere in a long string sends the string through validation.
        var ascii: [UInt8] = (0x20...0x7E).filter { $0 != 0x22 && $0 != 0x5C }
        ascii.append(0x7F)
        XCTAssertEqual(try JSONParser.parse([0x22] + ascii + [0x22]), .string(String(decoding: ascii, as: UTF8.self)))
        for position in [0, 37, ascii.count - 1] {
            var bytes = ascii
            bytes[position] = 0x80
            assertJSONError([0x22] + bytes + [0x22], .invalidUnicode(offset: 1))
        }
    }

    // MARK: - Depth

    func testDefaultDepthLimit() throws {
        XCTAssertEqual(JSONParser.defaultMaxDepth, 32)
        let ok = String(repeating: "[", count: 32) + String(repeating: "]", count: 32)
        XCTAssertNoThrow(try JSONParser.parse(ok))
        let deep = String(repeating: "[", count: 33) + String(repeating: "]", count: 33)
        assertJSONError(deep, .tooDeep(limit: 32))
    }

    func testDepthCountsObjectsAndArraysAlike() throws {
        var ok = ""
        for i in 0..<32 { ok += i.isMultiple(of: 2) ? #"{"k":"# : "[" }
        ok += "1"
        for i in (0..<32).reversed() { ok += i.isMultiple(of: 2) ? "}" : "]" }
        XCTAssertNoThrow(try JSONParser.parse(ok))
        assertJSONError("[" + ok + "]", .tooDeep(limit: 32))
    }

    func testCustomDepthLimit() throws {
        XCTAssertEqual(try JSONParser.parse("1", maxDepth: 0), .int(1))
        assertJSONError("[]", .tooDeep(limit: 0), maxDepth: 0)
        XCTAssertEqual(try JSONParser.parse("[1]", maxDepth: 1), .array([.int(1)]))
        assertJSONError("[[1]]", .tooDeep(limit: 1), maxDepth: 1)
        assertJSONError(#"{"a":{}}"#, .tooDeep(limit: 1), maxDepth: 1)
        XCTAssertEqual(try JSONParser.parse("[[],[],{}]", maxDepth: 2), .array([.array([]), .array([]), .object([])]))
    }

    func testHostileNestingIsRefusedWithoutRecursingDeeply() {
        let hostile = String(repeating: "[", count: 200_000)
        assertJSONError(hostile, .tooDeep(limit: 32))
        let hostileObjects = String(repeating: #"{"a":"#, count: 100_000)
        assertJSONError(hostileObjects, .tooDeep(limit: 32))
    }

    // MARK: - parsePrefix

    func testParsePrefixReturnsConsumedCount() throws {
        let bytes = Array(#"["a",1]  rest"#.utf8)
        let (value, consumed) = try bytes.withUnsafeBufferPointer { buf in
            try Result { () throws(JSONError) in try JSONParser.parsePrefix(buf) }.get()
        }
        XCTAssertEqual(value, .array([.string("a"), .int(1)]))
        XCTAssertEqual(consumed, 9)  // the value and the whitespace after it
    }

    func testParsePrefixStillReportsErrors() {
        let bytes = Array("[1,".utf8)
        let result = bytes.withUnsafeBufferPointer { buf in
            Result { () throws(JSONError) in try JSONParser.parsePrefix(buf) }
        }
        guard case .failure(let error) = result else { return XCTFail("expected failure") }
        XCTAssertEqual(error, .unexpectedEnd)
    }
}
