/// The placeholders that stand for binary attachments in the JSON of a `45`/`46` packet:
/// `{"_placeholder":true,"num":k}` marks where attachment `k` (0-based, in arrival order) goes.
///
/// Relay is stricter than socket.io-parser, which treats any object whose `_placeholder` is
/// `true` as a placeholder and ignores its other keys: an object with a `_placeholder` key must
/// have exactly the keys `_placeholder` (`true`) and `num` (an integer written without a
/// fraction or exponent), so nothing can ride along inside one, and the `n` placeholders of a
/// packet must name `0..<n` once each.
public enum BinaryPlaceholder {
    public static let key = "_placeholder"

    /// `{"_placeholder":true,"num":num}`, as socket.io-parser writes it.
    public static func json(_ num: Int) -> JSONValue {
        .object([(key, .bool(true)), ("num", .int(Int64(num)))])
    }

    /// Whether `value` claims to be a placeholder: an object with a `_placeholder` key.
    public static func isPlaceholder(_ value: JSONValue) -> Bool {
        guard case .object(let pairs) = value else { return false }
        return pairs.contains { $0.0 == key }
    }

    /// The attachment number of a well-formed placeholder, `nil` for anything else.
    public static func number(of value: JSONValue) -> Int64? {
        guard case .object(let pairs) = value, pairs.count == 2 else { return nil }
        var flag: Bool?
        var num: Int64?
        for (k, v) in pairs {
            switch (k, v) {
            case (key, .bool(let b)): flag = b
            case ("num", .int(let i)): num = i
            default: return nil
            }
        }
        guard flag == true else { return nil }
        return num
    }

    /// How many placeholders (well-formed or not) `value` holds, at any depth.
    public static func count(in value: JSONValue) -> Int {
        switch value {
        case .array(let items): return items.reduce(0) { $0 + count(in: $1) }
        case .object(let pairs):
            if isPlaceholder(value) { return 1 }
            return pairs.reduce(0) { $0 + count(in: $1.1) }
        default: return 0
        }
    }

    /// Checks that `value` holds exactly `attachmentCount` placeholders, well-formed, naming
    /// `0..<attachmentCount` once each. Recursion is bounded by the JSON's nesting limit.
    public static func validate(_ value: JSONValue, attachmentCount: Int) throws(PlaceholderError) {
        var seen = [Bool](repeating: false, count: max(0, attachmentCount))
        try visit(value, &seen)
        if let missing = seen.firstIndex(of: false) { throw .missing(num: missing) }
    }

    private static func visit(_ value: JSONValue, _ seen: inout [Bool]) throws(PlaceholderError) {
        switch value {
        case .array(let items):
            for item in items { try visit(item, &seen) }
        case .object(let pairs):
            guard isPlaceholder(value) else {
                for (_, v) in pairs { try visit(v, &seen) }
                return
            }
            guard let num = number(of: value) else { throw .malformed }
            guard num >= 0, num < Int64(seen.count) else { throw .outOfRange(num: num, count: seen.count) }
            let index = Int(num)
            guard !seen[index] else { throw .duplicate(num: index) }
            seen[index] = true
        default:
            return
        }
    }
}
