/// A request target (`/path?query`) taken apart: the path, and the decoded query parameters.
///
/// Parameters are `&`-separated `name[=value]` pairs (`application/x-www-form-urlencoded`):
/// `+` is a space and `%XX` is the byte XX. A `%` not followed by two hex digits is kept as it
/// is. A pair whose decoded name or value is not valid UTF-8 is dropped. The first value of a
/// name wins. Only the first `maxParameters` non-empty pairs are read, so the work per request
/// is bounded whatever the query. Nothing here can trap.
public struct QueryString: Sendable {
    /// Pairs after this many are ignored.
    public static let maxParameters = 64

    /// The part before the first `?`, not decoded.
    public let path: String
    private let items: [String: String]

    /// Parses `uri`, the request target of an HTTP request line.
    public init(uri: String) {
        let utf8 = uri.utf8
        guard let question = utf8.firstIndex(of: UInt8(ascii: "?")) else {
            path = uri
            items = [:]
            return
        }
        path = String(decoding: utf8[..<question], as: UTF8.self)
        var items: [String: String] = [:]
        var read = 0
        for pair in utf8[utf8.index(after: question)...].split(separator: UInt8(ascii: "&")) {
            guard read < Self.maxParameters else { break }
            read += 1
            let name: ArraySlice<UInt8>.SubSequence
            let value: ArraySlice<UInt8>.SubSequence
            let bytes = ArraySlice(pair)
            if let equals = bytes.firstIndex(of: UInt8(ascii: "=")) {
                name = bytes[..<equals]
                value = bytes[bytes.index(after: equals)...]
            } else {
                name = bytes
                value = []
            }
            guard let key = Self.formDecode(name), let decoded = Self.formDecode(value) else { continue }
            if items[key] == nil { items[key] = decoded }
        }
        self.items = items
    }

    /// The first value of parameter `name` (an empty string for a bare `name`), if present.
    public subscript(name: String) -> String? { items[name] }

    /// Decodes one component (`+` → space, `%XX` → byte); `nil` if the result is not UTF-8.
    public static func formDecode<Bytes: Collection>(_ bytes: Bytes) -> String? where Bytes.Element == UInt8 {
        var out: [UInt8] = []
        out.reserveCapacity(bytes.count)
        var index = bytes.startIndex
        while index != bytes.endIndex {
            let byte = bytes[index]
            index = bytes.index(after: index)
            switch byte {
            case UInt8(ascii: "+"):
                out.append(UInt8(ascii: " "))
            case UInt8(ascii: "%"):
                // Two hex digits make a byte; anything else leaves the `%` as it is.
                guard index != bytes.endIndex, let high = hexValue(bytes[index]) else {
                    out.append(byte)
                    continue
                }
                let next = bytes.index(after: index)
                guard next != bytes.endIndex, let low = hexValue(bytes[next]) else {
                    out.append(byte)
                    continue
                }
                out.append(high << 4 | low)
                index = bytes.index(after: next)
            default:
                out.append(byte)
            }
        }
        return String(validating: out, as: UTF8.self)
    }

    /// Decodes a path segment or a query component for display or lookup, as `formDecode`
    /// does; when the result would not be valid UTF-8, the input is returned with only `+`
    /// replaced, undecoded.
    public static func decode(_ s: Substring) -> String {
        if let decoded = formDecode(s.utf8) { return decoded }
        return String(decoding: s.utf8.map { $0 == UInt8(ascii: "+") ? UInt8(ascii: " ") : $0 }, as: UTF8.self)
    }

    static func hexValue(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): return byte - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): return byte - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): return byte - UInt8(ascii: "A") + 10
        default: return nil
        }
    }
}
