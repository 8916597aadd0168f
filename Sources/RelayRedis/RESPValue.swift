import NIOCore

/// A RESP2/RESP3 value.
public enum RESPValue: Sendable, Equatable {
    case simpleString(String)
    case error(String)
    case integer(Int64)
    case bulkString(ByteBuffer)
    case null
    case array([RESPValue])
    // RESP3
    case double(Double)
    case boolean(Bool)
    case map([(RESPValue, RESPValue)])
    case set([RESPValue])
    /// An out-of-band push (pub/sub messages in RESP3).
    case push([RESPValue])
    case bigNumber(String)
    case verbatim(String)

    public static func == (a: RESPValue, b: RESPValue) -> Bool {
        switch (a, b) {
        case let (.simpleString(x), .simpleString(y)), let (.error(x), .error(y)), let (.bigNumber(x), .bigNumber(y)), let (.verbatim(x), .verbatim(y)): return x == y
        case let (.integer(x), .integer(y)): return x == y
        case let (.bulkString(x), .bulkString(y)): return x == y
        case (.null, .null): return true
        case let (.array(x), .array(y)), let (.set(x), .set(y)), let (.push(x), .push(y)): return x == y
        case let (.double(x), .double(y)): return x == y
        case let (.boolean(x), .boolean(y)): return x == y
        case let (.map(x), .map(y)): return x.count == y.count && zip(x, y).allSatisfy { $0.0 == $1.0 && $0.1 == $1.1 }
        default: return false
        }
    }

    /// The value as text (simple, bulk or verbatim strings).
    public var string: String? {
        switch self {
        case .simpleString(let s), .verbatim(let s): return s
        case .bulkString(let b): return String(buffer: b)
        default: return nil
        }
    }

    public var int: Int64? {
        switch self {
        case .integer(let i): return i
        case .bulkString, .simpleString: return string.flatMap { Int64($0) }
        default: return nil
        }
    }

    /// Elements of an array, set or push.
    public var elements: [RESPValue]? {
        switch self {
        case .array(let a), .set(let a), .push(let a): return a
        default: return nil
        }
    }
}

/// Why a RESP stream could not be parsed.
public enum RESPError: Error, Equatable, Sendable {
    case invalidType(UInt8)
    case invalidLength
    case invalidInteger
    case tooDeep
    /// The server answered with an error reply.
    case server(String)
    case connectionClosed
    case unavailable
}
