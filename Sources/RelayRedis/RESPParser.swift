import NIOCore

/// Incremental RESP2/RESP3 parser: `parse` returns a value when a whole one is buffered, or
/// `nil` (consuming nothing) when more bytes are needed. Lengths and nesting are bounded.
public struct RESPParser: Sendable {
    public static let maxBulkLength = 64 * 1024 * 1024
    public static let maxElements = 1_000_000
    public static let maxDepth = 16

    public init() {}

    public mutating func parse(_ buffer: inout ByteBuffer) throws(RESPError) -> RESPValue? {
        var copy = buffer
        guard let value = try Self.value(&copy, depth: 0) else { return nil }
        buffer = copy
        return value
    }

    /// Reads up to CRLF; `nil` if the line is not complete yet.
    static func line(_ buffer: inout ByteBuffer) -> String? {
        let view = buffer.readableBytesView
        guard let cr = view.firstIndex(of: UInt8(ascii: "\r")), cr + 1 < view.endIndex else { return nil }
        guard view[cr + 1] == UInt8(ascii: "\n") else { return nil }
        let length = cr - view.startIndex
        let s = buffer.readString(length: length)
        buffer.moveReaderIndex(forwardBy: 2)
        return s
    }

    static func integer(_ buffer: inout ByteBuffer) throws(RESPError) -> Int64? {
        guard let l = line(&buffer) else { return nil }
        guard let v = Int64(l) else { throw .invalidInteger }
        return v
    }

    static func value(_ buffer: inout ByteBuffer, depth: Int) throws(RESPError) -> RESPValue? {
        guard depth <= maxDepth else { throw .tooDeep }
        guard let type = buffer.readInteger(as: UInt8.self) else { return nil }
        switch type {
        case UInt8(ascii: "+"): return line(&buffer).map { .simpleString($0) }
        case UInt8(ascii: "-"): return line(&buffer).map { .error($0) }
        case UInt8(ascii: ":"): return try integer(&buffer).map { .integer($0) }
        case UInt8(ascii: "("): return line(&buffer).map { .bigNumber($0) }
        case UInt8(ascii: ","):
            guard let l = line(&buffer) else { return nil }
            switch l {
            case "inf": return .double(.infinity)
            case "-inf": return .double(-.infinity)
            case "nan": return .double(.nan)
            default:
                guard let d = Double(l) else { throw .invalidInteger }
                return .double(d)
            }
        case UInt8(ascii: "#"):
            guard let l = line(&buffer) else { return nil }
            guard l == "t" || l == "f" else { throw .invalidInteger }
            return .boolean(l == "t")
        case UInt8(ascii: "_"):
            return line(&buffer).map { _ in .null }
        case UInt8(ascii: "$"), UInt8(ascii: "="), UInt8(ascii: "!"):
            guard let n = try integer(&buffer) else { return nil }
            if n == -1 { return .null }
            guard n >= 0, n <= maxBulkLength else { throw .invalidLength }
            guard buffer.readableBytes >= Int(n) + 2, let slice = buffer.readSlice(length: Int(n)) else { return nil }
            buffer.moveReaderIndex(forwardBy: 2)
            switch type {
            case UInt8(ascii: "="): return .verbatim(String(String(buffer: slice).dropFirst(4)))
            case UInt8(ascii: "!"): return .error(String(buffer: slice))
            default: return .bulkString(slice)
            }
        case UInt8(ascii: "*"), UInt8(ascii: "~"), UInt8(ascii: ">"), UInt8(ascii: "%"), UInt8(ascii: "|"):
            guard let n = try integer(&buffer) else { return nil }
            if n == -1 { return .null }
            guard n >= 0, n <= maxElements else { throw .invalidLength }
            let count = (type == UInt8(ascii: "%") || type == UInt8(ascii: "|")) ? Int(n) * 2 : Int(n)
            var items: [RESPValue] = []
            items.reserveCapacity(min(count, 1024))
            for _ in 0..<count {
                guard let v = try value(&buffer, depth: depth + 1) else { return nil }
                items.append(v)
            }
            switch type {
            case UInt8(ascii: "~"): return .set(items)
            case UInt8(ascii: ">"): return .push(items)
            case UInt8(ascii: "%"): return .map(stride(from: 0, to: items.count, by: 2).map { (items[$0], items[$0 + 1]) })
            case UInt8(ascii: "|"):
                // An attribute precedes the real value: skip it.
                return try value(&buffer, depth: depth + 1)
            default: return .array(items)
            }
        default:
            throw .invalidType(type)
        }
    }

    /// Encodes a command as a RESP array of bulk strings.
    public static func encodeCommand(_ args: [String], into buffer: inout ByteBuffer) {
        buffer.writeString("*\(args.count)\r\n")
        for a in args {
            buffer.writeString("$\(a.utf8.count)\r\n")
            buffer.writeString(a)
            buffer.writeString("\r\n")
        }
    }

    /// Encodes a command whose last argument is raw bytes (a pub/sub payload).
    public static func encodeCommand(_ args: [String], payload: ByteBuffer, into buffer: inout ByteBuffer) {
        buffer.writeString("*\(args.count + 1)\r\n")
        for a in args {
            buffer.writeString("$\(a.utf8.count)\r\n")
            buffer.writeString(a)
            buffer.writeString("\r\n")
        }
        buffer.writeString("$\(payload.readableBytes)\r\n")
        var p = payload
        buffer.writeBuffer(&p)
        buffer.writeString("\r\n")
    }
}
