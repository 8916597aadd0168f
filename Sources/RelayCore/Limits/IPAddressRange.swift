/// A CIDR block (`10.0.0.0/8`, `fd00::/8`) or a single address (`127.0.0.1` = `/32`,
/// `::1` = `/128`). The `trusted-proxies` setting is a list of these.
public struct IPAddressRange: Hashable, Sendable, CustomStringConvertible {
    /// Why a range was refused, in words an operator can act on.
    public struct ParseError: Error, Equatable, Sendable, CustomStringConvertible {
        public var text: String
        public var reason: String
        public var description: String { "\"\(text)\": \(reason)" }
    }

    /// The first address of the block (host bits zero).
    public let network: IPAddress
    /// Leading bits that must match: 0…32 for IPv4, 0…128 for IPv6.
    public let prefixLength: Int

    /// Parses `ADDRESS` or `ADDRESS/PREFIX`. IPv4-mapped IPv6 addresses are taken as IPv4.
    /// A block whose address has host bits set (`10.1.2.3/8`) is refused: it is almost always
    /// a typo, and silently masking it would trust a different network than the one written.
    public init(parsing text: String) throws(ParseError) {
        let trimmed = text.trimmingASCIISpaces()
        let parts = trimmed.split(separator: "/", maxSplits: 1, omittingEmptySubsequences: false)
        guard let first = parts.first, let parsed = IPAddress(first) else {
            throw ParseError(text: text, reason: "not an IPv4 or IPv6 address or CIDR block (expected e.g. 10.0.0.0/8, 192.0.2.7, fd00::/8)")
        }
        let address = parsed.unmapped
        let maxBits = address.isIPv4 ? 32 : 128
        var bits = maxBits
        if parts.count == 2 {
            let p = parts[1]
            guard !p.isEmpty, p.utf8.count <= 3, p.utf8.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }), let n = Int(p), n <= maxBits else {
                throw ParseError(text: text, reason: "the prefix length must be 0…\(maxBits) for an \(address.isIPv4 ? "IPv4" : "IPv6") address")
            }
            bits = n
        }
        let network = Self.mask(address, bits: bits)
        guard network == address else {
            throw ParseError(text: text, reason: "host bits are set; did you mean \(network)/\(bits)?")
        }
        self.network = network
        self.prefixLength = bits
    }

    /// Whether `address` is inside the block. IPv4-mapped IPv6 addresses match IPv4 blocks.
    public func contains(_ address: IPAddress) -> Bool {
        let a = address.unmapped
        guard a.isIPv4 == network.isIPv4 else { return false }
        return Self.mask(a, bits: prefixLength) == network
    }

    /// `10.0.0.0/8`; a single address prints without a prefix.
    public var description: String {
        prefixLength == (network.isIPv4 ? 32 : 128) ? network.description : "\(network)/\(prefixLength)"
    }

    static func mask(_ address: IPAddress, bits: Int) -> IPAddress {
        switch address {
        case .v4(let v):
            let m: UInt32 = bits <= 0 ? 0 : bits >= 32 ? .max : ~(UInt32.max >> UInt32(bits))
            return .v4(v & m)
        case .v6(let high, let low):
            let mh: UInt64 = bits <= 0 ? 0 : bits >= 64 ? .max : ~(UInt64.max >> UInt64(bits))
            let lowBits = bits - 64
            let ml: UInt64 = lowBits <= 0 ? 0 : lowBits >= 64 ? .max : ~(UInt64.max >> UInt64(lowBits))
            return .v6(high: high & mh, low: low & ml)
        }
    }
}

/// The proxies whose word about the client is believed: the source address of their PROXY
/// protocol header, and their `X-Forwarded-For` header. Nobody else's.
public struct TrustedProxies: Sendable, Equatable {
    /// Most `X-Forwarded-For` entries walked per request; a longer chain of trusted hops is
    /// treated as invalid (the connection's own address is used).
    public static let maxForwardedHops = 32

    public var ranges: [IPAddressRange]

    public init(_ ranges: [IPAddressRange] = []) {
        self.ranges = ranges
    }

    /// Parses a list of `trusted-proxies` entries; throws on the first bad one.
    public init(parsing entries: [String]) throws(IPAddressRange.ParseError) {
        var ranges: [IPAddressRange] = []
        for entry in entries {
            ranges.append(try IPAddressRange(parsing: entry))
        }
        self.ranges = ranges
    }

    public var isEmpty: Bool { ranges.isEmpty }

    /// Whether `address` is one of the trusted proxies.
    public func contains(_ address: IPAddress) -> Bool {
        ranges.contains { $0.contains(address) }
    }

    /// The client of a request that came from `peer` with these `X-Forwarded-For` header
    /// values (in header order).
    ///
    /// - `peer` not trusted: `peer` (whatever the header says; anybody can write one).
    /// - Otherwise the header is read right to left, skipping trusted proxies; the first
    ///   address that is not a trusted proxy is the client. If every entry is trusted, the
    ///   left-most one is. No header, or an empty one: `peer`.
    /// - An entry that is not an address (`unknown`, garbage, an empty element), or more than
    ///   `maxForwardedHops` trusted hops: the header is invalid and `peer` is the client.
    ///
    /// Entries may be plain addresses or carry a port (`192.0.2.1:4711`, `[2001:db8::1]:4711`).
    public func clientAddress(peer: IPAddress, forwardedFor values: [String]) -> IPAddress {
        let peer = peer.unmapped
        guard contains(peer) else { return peer }
        var elements: [Substring] = []
        for value in values {
            for element in value.split(separator: ",", omittingEmptySubsequences: false) {
                elements.append(element)
            }
        }
        if elements.isEmpty || (elements.count == 1 && elements[0].trimmingASCIISpaces().isEmpty) { return peer }
        var hops = 0
        var last = peer
        for element in elements.reversed() {
            guard let address = Self.parseForwardedElement(element) else { return peer }
            if !contains(address) { return address }
            last = address
            hops += 1
            if hops >= Self.maxForwardedHops { return peer }
        }
        return last
    }

    /// One `X-Forwarded-For` element: an address, `v4:port`, `[v6]` or `[v6]:port`.
    static func parseForwardedElement(_ raw: Substring) -> IPAddress? {
        let s = raw.trimmingASCIISpaces()
        guard !s.isEmpty, s.utf8.count <= 64 else { return nil }
        if let a = IPAddress(s) { return a.unmapped }
        if s.hasPrefix("[") {
            guard let close = s.firstIndex(of: "]") else { return nil }
            let inner = s[s.index(after: s.startIndex)..<close]
            let rest = s[s.index(after: close)...]
            guard rest.isEmpty || (rest.hasPrefix(":") && isPort(rest.dropFirst())), let a = IPAddress(inner), !a.isIPv4 else { return nil }
            return a.unmapped
        }
        let parts = s.split(separator: ":", omittingEmptySubsequences: false)
        if parts.count == 2, isPort(parts[1]), let a = IPAddress(parts[0]), a.isIPv4 { return a }
        return nil
    }

    private static func isPort(_ s: Substring) -> Bool {
        guard !s.isEmpty, s.utf8.count <= 5, s.utf8.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }), let n = Int(s) else { return false }
        return n <= 65535
    }
}

extension StringProtocol {
    /// The string without leading and trailing spaces and tabs.
    func trimmingASCIISpaces() -> Substring {
        let s = Substring(self)
        guard let first = s.firstIndex(where: { $0 != " " && $0 != "\t" }),
              let last = s.lastIndex(where: { $0 != " " && $0 != "\t" }) else { return s[s.endIndex...] }
        return s[first...last]
    }
}
