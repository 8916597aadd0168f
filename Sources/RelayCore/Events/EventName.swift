/// The event-name grammar: `entity:action-word`, lowercase ASCII letters and digits, words
/// joined by single hyphens, exactly one colon. Underscores are never allowed.
///
/// Equivalent to `^[a-z0-9]+(-[a-z0-9]+)*:[a-z0-9]+(-[a-z0-9]+)*$`, checked by hand because it
/// runs on every inbound event.
public enum EventName {
    public static let maxLength = 64

    /// The part before the colon (`typing` of `typing:start`); the whole name when there is none.
    public static func entity(of name: String) -> String {
        guard let colon = name.utf8.firstIndex(of: UInt8(ascii: ":")) else { return name }
        return String(decoding: name.utf8[..<colon], as: UTF8.self)
    }

    public static func isValid(_ name: String) -> Bool {
        let utf8 = name.utf8
        guard utf8.count <= maxLength else { return false }
        return utf8.withContiguousStorageIfAvailable(isValid) ?? isValid(Array(utf8))
    }

    public static func isValid(_ bytes: some Collection<UInt8>) -> Bool {
        var colons = 0
        var previous: UInt8 = 0  // 0 = start of a part
        for b in bytes {
            switch b {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "0")...UInt8(ascii: "9"):
                previous = b
            case UInt8(ascii: "-"):
                // A hyphen must sit between two word characters.
                guard previous != 0, previous != UInt8(ascii: "-") else { return false }
                previous = b
            case UInt8(ascii: ":"):
                guard colons == 0, previous != 0, previous != UInt8(ascii: "-") else { return false }
                colons += 1
                previous = 0
            default:
                return false
            }
        }
        return colons == 1 && previous != 0 && previous != UInt8(ascii: "-")
    }
}
