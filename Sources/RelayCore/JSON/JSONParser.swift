/// A strict RFC 8259 JSON parser over UTF-8 bytes.
///
/// Written by hand because the hot path needs ordered objects, a nesting limit and typed errors,
/// and because Foundation's `JSONSerialization` is slow and untyped on Linux.
///
/// Stricter than RFC 8259 in one way: an object with a repeated key is refused with
/// `JSONError.duplicateKey(offset:)` (RFC 8259 §4 says names SHOULD be unique, and parsers
/// disagree on which duplicate wins, so a payload that means one thing to Relay and another to a
/// client or a JWT library is refused outright). Keys are compared as Swift `String`s, that is
/// by canonical equivalence, so `"e\u0301"` and `"\u00e9"` count as the same key too.
///
/// Every read of the input goes through an explicit bounds check: the buffer is an
/// `UnsafeBufferPointer`, whose subscript is not checked in optimized builds.
public struct JSONParser {
    /// Nesting deeper than this is refused, so hostile input cannot exhaust the stack.
    public static let defaultMaxDepth = 32
    /// Objects with up to this many keys are checked for duplicates by a linear scan; larger ones
    /// use a `Set`.
    static let linearKeyScanLimit = 8

    /// Parses a whole JSON text; anything but whitespace after the value is refused.
    public static func parse(_ text: String, maxDepth: Int = defaultMaxDepth) throws(JSONError) -> JSONValue {
        var copy = text
        return try copy.withUTF8 { buf in Result { () throws(JSONError) in try parse(buf, maxDepth: maxDepth) } }.get()
    }

    /// Parses a whole JSON text given as UTF-8 bytes.
    public static func parse(_ bytes: [UInt8], maxDepth: Int = defaultMaxDepth) throws(JSONError) -> JSONValue {
        try bytes.withUnsafeBufferPointer { buf in Result { () throws(JSONError) in try parse(buf, maxDepth: maxDepth) } }.get()
    }

    /// Parses a whole JSON text given as UTF-8 bytes.
    public static func parse(_ bytes: UnsafeBufferPointer<UInt8>, maxDepth: Int = defaultMaxDepth) throws(JSONError) -> JSONValue {
        var parser = JSONParser(bytes: bytes, maxDepth: maxDepth)
        parser.skipWhitespace()
        let value = try parser.parseValue(depth: 0)
        parser.skipWhitespace()
        guard parser.index == bytes.count else { throw .trailingBytes(offset: parser.index) }
        return value
    }

    /// Parses one value at the start of `bytes` and returns it with the number of bytes consumed
    /// (whitespace after the value included). Used by the Socket.IO codec, where a packet is a
    /// header followed by a JSON value.
    public static func parsePrefix(_ bytes: UnsafeBufferPointer<UInt8>, maxDepth: Int = defaultMaxDepth) throws(JSONError) -> (JSONValue, Int) {
        var parser = JSONParser(bytes: bytes, maxDepth: maxDepth)
        parser.skipWhitespace()
        let value = try parser.parseValue(depth: 0)
        parser.skipWhitespace()
        return (value, parser.index)
    }

    private let bytes: UnsafeBufferPointer<UInt8>
    private let maxDepth: Int
    private var index = 0

    private init(bytes: UnsafeBufferPointer<UInt8>, maxDepth: Int) {
        self.bytes = bytes
        self.maxDepth = maxDepth
    }

    private mutating func skipWhitespace() {
        while index < bytes.count {
            switch bytes[index] {
            case 0x20, 0x09, 0x0A, 0x0D: index += 1
            default: return
            }
        }
    }

    private func peek() throws(JSONError) -> UInt8 {
        guard index < bytes.count else { throw .unexpectedEnd }
        return bytes[index]
    }

    private mutating func expect(_ literal: StaticString) throws(JSONError) {
        let start = index
        for i in 0..<literal.utf8CodeUnitCount {
            guard index < bytes.count else { throw .unexpectedEnd }
            guard bytes[index] == literal.utf8Start[i] else { throw .unexpectedByte(bytes[index], offset: start + i) }
            index += 1
        }
    }

    private mutating func parseValue(depth: Int) throws(JSONError) -> JSONValue {
        let byte = try peek()
        switch byte {
        case UInt8(ascii: "{"): return try parseObject(depth: depth + 1)
        case UInt8(ascii: "["): return try parseArray(depth: depth + 1)
        case UInt8(ascii: "\""): return .string(try parseString())
        case UInt8(ascii: "t"): try expect("true"); return .bool(true)
        case UInt8(ascii: "f"): try expect("false"); return .bool(false)
        case UInt8(ascii: "n"): try expect("null"); return .null
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return try parseNumber()
        default: throw .unexpectedByte(byte, offset: index)
        }
    }

    private mutating func parseObject(depth: Int) throws(JSONError) -> JSONValue {
        guard depth <= maxDepth else { throw .tooDeep(limit: maxDepth) }
        index += 1
        var pairs: [(String, JSONValue)] = []
        var keys: Set<String>?  // built once the object outgrows the linear scan
        skipWhitespace()
        if try peek() == UInt8(ascii: "}") { index += 1; return .object(pairs) }
        while true {
            skipWhitespace()
            let quote = try peek()
            guard quote == UInt8(ascii: "\"") else { throw .unexpectedByte(quote, offset: index) }
            let keyOffset = index
            let key = try parseString()
            if pairs.count < Self.linearKeyScanLimit {
                for (existing, _) in pairs where existing == key { throw .duplicateKey(offset: keyOffset) }
            } else {
                if keys == nil { keys = Set(pairs.lazy.map(\.0)) }
                guard keys?.insert(key).inserted == true else { throw .duplicateKey(offset: keyOffset) }
            }
            skipWhitespace()
            let colon = try peek()
            guard colon == UInt8(ascii: ":") else { throw .unexpectedByte(colon, offset: index) }
            index += 1
            skipWhitespace()
            pairs.append((key, try parseValue(depth: depth)))
            skipWhitespace()
            let next = try peek()
            index += 1
            if next == UInt8(ascii: ",") { continue }
            if next == UInt8(ascii: "}") { return .object(pairs) }
            throw .unexpectedByte(next, offset: index - 1)
        }
    }

    private mutating func parseArray(depth: Int) throws(JSONError) -> JSONValue {
        guard depth <= maxDepth else { throw .tooDeep(limit: maxDepth) }
        index += 1
        var items: [JSONValue] = []
        skipWhitespace()
        if try peek() == UInt8(ascii: "]") { index += 1; return .array(items) }
        while true {
            skipWhitespace()
            items.append(try parseValue(depth: depth))
            skipWhitespace()
            let next = try peek()
            index += 1
            if next == UInt8(ascii: ",") { continue }
            if next == UInt8(ascii: "]") { return .array(items) }
            throw .unexpectedByte(next, offset: index - 1)
        }
    }

    private mutating func parseString() throws(JSONError) -> String {
        index += 1  // opening quote
        let start = index
        // Fast path: no escapes.
        while index < bytes.count {
            let b = bytes[index]
            if b == UInt8(ascii: "\"") {
                let slice = UnsafeBufferPointer(rebasing: bytes[start..<index])
                index += 1
                return try Self.validatedString(slice, offset: start)
            }
            if b == UInt8(ascii: "\\") { break }
            if b < 0x20 { throw .controlCharacterInString(offset: index) }
            index += 1
        }
        guard index < bytes.count else { throw .unexpectedEnd }
        var out = [UInt8](UnsafeBufferPointer(rebasing: bytes[start..<index]))
        while true {
            guard index < bytes.count else { throw .unexpectedEnd }
            let b = bytes[index]
            if b == UInt8(ascii: "\"") {
                index += 1
                return try out.withUnsafeBufferPointer { buf in
                    Result { () throws(JSONError) in try Self.validatedString(buf, offset: start) }
                }.get()
            }
            if b < 0x20 { throw .controlCharacterInString(offset: index) }
            if b != UInt8(ascii: "\\") { out.append(b); index += 1; continue }
            index += 1
            guard index < bytes.count else { throw .unexpectedEnd }
            let e = bytes[index]
            index += 1
            switch e {
            case UInt8(ascii: "\""): out.append(0x22)
            case UInt8(ascii: "\\"): out.append(0x5C)
            case UInt8(ascii: "/"): out.append(0x2F)
            case UInt8(ascii: "b"): out.append(0x08)
            case UInt8(ascii: "f"): out.append(0x0C)
            case UInt8(ascii: "n"): out.append(0x0A)
            case UInt8(ascii: "r"): out.append(0x0D)
            case UInt8(ascii: "t"): out.append(0x09)
            case UInt8(ascii: "u"):
                var scalar = try parseHex4()
                if (0xD800...0xDBFF).contains(scalar) {
                    // A high surrogate must be followed by an escaped low surrogate.
                    guard index + 1 < bytes.count, bytes[index] == UInt8(ascii: "\\"), bytes[index + 1] == UInt8(ascii: "u") else {
                        throw .invalidUnicode(offset: index)
                    }
                    index += 2
                    let low = try parseHex4()
                    guard (0xDC00...0xDFFF).contains(low) else { throw .invalidUnicode(offset: index) }
                    scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
                } else if (0xDC00...0xDFFF).contains(scalar) {
                    throw .invalidUnicode(offset: index)
                }
                guard let u = Unicode.Scalar(scalar) else { throw .invalidUnicode(offset: index) }
                UTF8.encode(u) { out.append($0) }
            default:
                throw .invalidEscape(offset: index - 1)
            }
        }
    }

    private mutating func parseHex4() throws(JSONError) -> UInt32 {
        guard index + 4 <= bytes.count else { throw .unexpectedEnd }
        var value: UInt32 = 0
        for _ in 0..<4 {
            let c = bytes[index]
            let digit: UInt32
            switch c {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = UInt32(c - UInt8(ascii: "0"))
            case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = UInt32(c - UInt8(ascii: "a") + 10)
            case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = UInt32(c - UInt8(ascii: "A") + 10)
            default: throw .invalidEscape(offset: index)
            }
            value = value << 4 | digit
            index += 1
        }
        return value
    }

    private static func validatedString(_ buf: UnsafeBufferPointer<UInt8>, offset: Int) throws(JSONError) -> String {
        // ASCII (most keys and values) is valid UTF-8 as it is: `String(decoding:)` only copies
        // it. `String(validating:)` goes through the standard library's unspecialised generic
        // path (a metadata lookup per string); it stays for everything else, which it rejects
        // when invalid instead of repairing.
        if ASCII.isASCII(buf) { return String(decoding: buf, as: UTF8.self) }
        guard let s = String(validating: buf, as: UTF8.self) else { throw .invalidUnicode(offset: offset) }
        return s
    }

    /// The byte at `index`, or `nil` at the end of the input.
    private func current() -> UInt8? { index < bytes.count ? bytes[index] : nil }

    private static func isDigit(_ b: UInt8?) -> Bool {
        guard let b else { return false }
        return (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(b)
    }

    private mutating func skipDigits() { while Self.isDigit(current()) { index += 1 } }

    private mutating func parseNumber() throws(JSONError) -> JSONValue {
        let start = index
        var isInteger = true
        if current() == UInt8(ascii: "-") { index += 1 }
        guard let first = current() else { throw .unexpectedEnd }
        if first == UInt8(ascii: "0") {
            index += 1
        } else if (UInt8(ascii: "1")...UInt8(ascii: "9")).contains(first) {
            skipDigits()
        } else {
            throw .invalidNumber(offset: start)
        }
        if current() == UInt8(ascii: ".") {
            isInteger = false
            index += 1
            let digits = index
            skipDigits()
            guard index > digits else { throw .invalidNumber(offset: start) }
        }
        if current() == UInt8(ascii: "e") || current() == UInt8(ascii: "E") {
            isInteger = false
            index += 1
            if current() == UInt8(ascii: "+") || current() == UInt8(ascii: "-") { index += 1 }
            let digits = index
            skipDigits()
            guard index > digits else { throw .invalidNumber(offset: start) }
        }
        let text = String(decoding: UnsafeBufferPointer(rebasing: bytes[start..<index]), as: UTF8.self)
        if isInteger, let i = Int64(text) { return .int(i) }
        guard let d = Double(text), d.isFinite else { throw .invalidNumber(offset: start) }
        return .double(d)
    }
}
