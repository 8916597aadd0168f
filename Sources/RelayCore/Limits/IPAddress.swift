/// An IPv4 or IPv6 address, parsed strictly from its text form and printed canonically
/// (dotted quad; RFC 5952 for IPv6). Used as the key of per-client limits, so one client has
/// exactly one spelling: an IPv4-mapped IPv6 address (`::ffff:192.0.2.1`) is the same client
/// as `192.0.2.1` once `unmapped` is applied.
public enum IPAddress: Hashable, Sendable, CustomStringConvertible {
    /// An IPv4 address, network byte order packed into the integer (`192.0.2.1` is `0xC000_0201`).
    case v4(UInt32)
    /// An IPv6 address: the high and low 64 bits.
    case v6(high: UInt64, low: UInt64)

    /// Parses `192.0.2.1` or an IPv6 address (`::1`, `2001:db8::1`, `::ffff:192.0.2.1`).
    /// Strict: no leading zeros in IPv4 parts, no zone (`%eth0`), no brackets, no port.
    public init?(_ text: some StringProtocol) {
        let bytes = Array(text.utf8)
        if let v4 = Self.parseV4(bytes[...]) {
            self = .v4(v4)
        } else if let v6 = Self.parseV6(bytes[...]) {
            self = v6
        } else {
            return nil
        }
    }

    /// Builds an address from 4 or 16 network-order bytes; `nil` for any other count.
    public init?(bytes: some Collection<UInt8>) {
        switch bytes.count {
        case 4:
            self = .v4(bytes.reduce(UInt32(0)) { $0 << 8 | UInt32($1) })
        case 16:
            var high: UInt64 = 0
            var low: UInt64 = 0
            for (i, b) in bytes.enumerated() {
                if i < 8 { high = high << 8 | UInt64(b) } else { low = low << 8 | UInt64(b) }
            }
            self = .v6(high: high, low: low)
        default:
            return nil
        }
    }

    /// The address's bytes in network order (4 or 16).
    public var bytes: [UInt8] {
        switch self {
        case .v4(let v):
            return (0..<4).map { UInt8(truncatingIfNeeded: v >> (24 - 8 * $0)) }
        case .v6(let high, let low):
            return (0..<8).map { UInt8(truncatingIfNeeded: high >> (56 - 8 * $0)) } + (0..<8).map { UInt8(truncatingIfNeeded: low >> (56 - 8 * $0)) }
        }
    }

    public var isIPv4: Bool {
        if case .v4 = self { return true }
        return false
    }

    /// The IPv4 address inside an IPv4-mapped IPv6 address (`::ffff:a.b.c.d`); any other
    /// address unchanged. Dual-stack sockets report IPv4 clients this way.
    public var unmapped: IPAddress {
        if case .v6(let high, let low) = self, high == 0, low >> 32 == 0xFFFF {
            return .v4(UInt32(truncatingIfNeeded: low))
        }
        return self
    }

    /// `192.0.2.1`, or RFC 5952 IPv6 (lower case, the longest run of two or more zero groups
    /// shortened to `::`, the first on a tie; `::ffff:192.0.2.1` for IPv4-mapped addresses).
    public var description: String {
        switch self {
        case .v4(let v):
            return Self.dotted(v)
        case .v6(let high, let low):
            if high == 0, low >> 32 == 0xFFFF {
                return "::ffff:" + Self.dotted(UInt32(truncatingIfNeeded: low))
            }
            let groups: [UInt16] = (0..<4).map { UInt16(truncatingIfNeeded: high >> (48 - 16 * $0)) }
                + (0..<4).map { UInt16(truncatingIfNeeded: low >> (48 - 16 * $0)) }
            // The longest run of zero groups (length ≥ 2).
            var bestStart = -1
            var bestLength = 0
            var i = 0
            while i < 8 {
                if groups[i] == 0 {
                    var j = i
                    while j < 8, groups[j] == 0 { j += 1 }
                    if j - i > bestLength { bestStart = i; bestLength = j - i }
                    i = j
                } else {
                    i += 1
                }
            }
            if bestLength < 2 { bestStart = -1 }
            var out = ""
            i = 0
            while i < 8 {
                if i == bestStart {
                    out += "::"
                    i += bestLength
                    continue
                }
                if !out.isEmpty, !out.hasSuffix(":") { out += ":" }
                out += String(groups[i], radix: 16)
                i += 1
            }
            return out
        }
    }

    private static func dotted(_ v: UInt32) -> String {
        "\(v >> 24 & 0xFF).\(v >> 16 & 0xFF).\(v >> 8 & 0xFF).\(v & 0xFF)"
    }

    /// `a.b.c.d`, each part 0…255 in decimal without leading zeros.
    static func parseV4(_ bytes: ArraySlice<UInt8>) -> UInt32? {
        var value: UInt32 = 0
        var parts = 0
        var part: UInt32 = 0
        var digits = 0
        var leadingZero = false
        for b in bytes {
            if b >= UInt8(ascii: "0"), b <= UInt8(ascii: "9") {
                if leadingZero { return nil }
                if digits == 0, b == UInt8(ascii: "0") { leadingZero = true }
                part = part * 10 + UInt32(b - UInt8(ascii: "0"))
                digits += 1
                if digits > 3 || part > 255 { return nil }
            } else if b == UInt8(ascii: ".") {
                guard digits > 0, parts < 3 else { return nil }
                value = value << 8 | part
                parts += 1
                part = 0
                digits = 0
                leadingZero = false
            } else {
                return nil
            }
        }
        guard digits > 0, parts == 3 else { return nil }
        return value << 8 | part
    }

    /// RFC 4291 text: eight groups of 1–4 hex digits, one `::` at most, an optional trailing
    /// dotted IPv4 address in place of the last two groups.
    static func parseV6(_ bytes: ArraySlice<UInt8>) -> IPAddress? {
        guard bytes.count >= 2, bytes.count <= 45 else { return nil }
        var head: [UInt16] = []
        var tail: [UInt16] = []
        var sawDoubleColon = false
        var i = bytes.startIndex
        let end = bytes.endIndex
        // A leading "::".
        if bytes[i] == UInt8(ascii: ":") {
            guard bytes.index(after: i) < end, bytes[bytes.index(after: i)] == UInt8(ascii: ":") else { return nil }
            sawDoubleColon = true
            i = bytes.index(i, offsetBy: 2)
            if i == end { return .v6(high: 0, low: 0) }
        }
        while i < end {
            // One group, or a trailing IPv4 address.
            var j = i
            var group: UInt32 = 0
            var digits = 0
            while j < end, let d = hexValue(bytes[j]) {
                group = group << 4 | UInt32(d)
                digits += 1
                if digits > 4 { return nil }
                j += 1
            }
            if j < end, bytes[j] == UInt8(ascii: ".") {
                // Trailing IPv4: the rest of the input.
                guard let v4 = parseV4(bytes[i..<end]) else { return nil }
                let groups = [UInt16(truncatingIfNeeded: v4 >> 16), UInt16(truncatingIfNeeded: v4)]
                if sawDoubleColon { tail += groups } else { head += groups }
                i = end
                break
            }
            guard digits > 0 else { return nil }
            if sawDoubleColon { tail.append(UInt16(truncatingIfNeeded: group)) } else { head.append(UInt16(truncatingIfNeeded: group)) }
            if head.count + tail.count > 8 { return nil }
            if j == end { i = end; break }
            guard bytes[j] == UInt8(ascii: ":") else { return nil }
            j += 1
            guard j < end else { return nil }  // a trailing single ':'
            if bytes[j] == UInt8(ascii: ":") {
                guard !sawDoubleColon else { return nil }
                sawDoubleColon = true
                j += 1
                if j == end { i = end; break }
            }
            i = j
        }
        let count = head.count + tail.count
        if sawDoubleColon {
            guard count <= 7 else { return nil }
        } else {
            guard count == 8 else { return nil }
        }
        let groups = head + [UInt16](repeating: 0, count: 8 - count) + tail
        var high: UInt64 = 0
        var low: UInt64 = 0
        for (k, g) in groups.enumerated() {
            if k < 4 { high = high << 16 | UInt64(g) } else { low = low << 16 | UInt64(g) }
        }
        return .v6(high: high, low: low)
    }

    private static func hexValue(_ b: UInt8) -> UInt8? {
        switch b {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): return b - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): return b - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): return b - UInt8(ascii: "A") + 10
        default: return nil
        }
    }
}
