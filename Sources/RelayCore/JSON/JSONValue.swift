/// A JSON value as Relay sees it on the wire.
///
/// Objects keep their keys in arrival order so that a forwarded payload reads the way the
/// sender wrote it; Relay only appends the fields it stamps (`from`, `ts`).
public enum JSONValue: Sendable, Equatable {
    case null
    case bool(Bool)
    case int(Int64)
    case double(Double)
    case string(String)
    case array([JSONValue])
    case object([(String, JSONValue)])

    public static func == (lhs: JSONValue, rhs: JSONValue) -> Bool {
        switch (lhs, rhs) {
        case (.null, .null): return true
        case let (.bool(a), .bool(b)): return a == b
        case let (.int(a), .int(b)): return a == b
        case let (.double(a), .double(b)): return a == b
        case let (.int(a), .double(b)), let (.double(b), .int(a)): return Double(a) == b
        case let (.string(a), .string(b)): return a == b
        case let (.array(a), .array(b)): return a == b
        case let (.object(a), .object(b)):
            // Key order does not matter; the values of a repeated key are compared in order, so
            // that equality stays reflexive and symmetric for objects with duplicate keys.
            guard a.count == b.count else { return false }
            for (k, _) in a {
                guard a.lazy.filter({ $0.0 == k }).map(\.1).elementsEqual(b.lazy.filter({ $0.0 == k }).map(\.1)) else { return false }
            }
            return true
        default: return false
        }
    }

    /// The value for `key` when this is an object (first match wins).
    public subscript(key: String) -> JSONValue? {
        guard case .object(let pairs) = self else { return nil }
        for (k, v) in pairs where k == key { return v }
        return nil
    }

    public var stringValue: String? {
        if case .string(let s) = self { return s }
        return nil
    }

    /// A number as `Double`, whether it arrived as an integer or not.
    public var doubleValue: Double? {
        switch self {
        case .int(let i): return Double(i)
        case .double(let d): return d
        default: return nil
        }
    }

    /// An integral number; a double with no fractional part counts.
    public var intValue: Int64? {
        switch self {
        case .int(let i): return i
        case .double(let d) where d.rounded() == d && abs(d) < 9.0e15: return Int64(d)
        default: return nil
        }
    }

    public var boolValue: Bool? {
        if case .bool(let b) = self { return b }
        return nil
    }

    public var isObject: Bool {
        if case .object = self { return true }
        return false
    }

    /// Returns an object with `key` set to `value`, replacing any existing field of that name.
    /// Used to stamp `from` and `ts` so that a client cannot forge them.
    public func setting(_ key: String, to value: JSONValue) -> JSONValue {
        guard case .object(var pairs) = self else { return self }
        pairs.removeAll { $0.0 == key }
        pairs.append((key, value))
        return .object(pairs)
    }

    /// Returns an object with each of `fields` set, replacing any existing field of those
    /// names: one copy of the fields however many are set (`setting` per field copies each time).
    public func setting(_ fields: [(String, JSONValue)]) -> JSONValue {
        guard case .object(let pairs) = self else { return self }
        var out: [(String, JSONValue)] = []
        out.reserveCapacity(pairs.count + fields.count)
        for pair in pairs where !fields.contains(where: { $0.0 == pair.0 }) { out.append(pair) }
        out.append(contentsOf: fields)
        return .object(out)
    }
}

extension JSONValue: ExpressibleByStringLiteral, ExpressibleByIntegerLiteral, ExpressibleByBooleanLiteral,
    ExpressibleByArrayLiteral, ExpressibleByDictionaryLiteral, ExpressibleByNilLiteral, ExpressibleByFloatLiteral
{
    public init(stringLiteral value: String) { self = .string(value) }
    public init(integerLiteral value: Int64) { self = .int(value) }
    public init(booleanLiteral value: Bool) { self = .bool(value) }
    public init(arrayLiteral elements: JSONValue...) { self = .array(elements) }
    public init(dictionaryLiteral elements: (String, JSONValue)...) { self = .object(elements) }
    public init(nilLiteral: ()) { self = .null }
    public init(floatLiteral value: Double) { self = .double(value) }
}
