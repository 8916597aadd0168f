/// The PROXY protocol header a load balancer (HAProxy `send-proxy`/`send-proxy-v2`, cloud
/// load balancers) writes at the start of a TCP connection to tell the server who the client
/// is — HAProxy's `proxy-protocol.txt`, versions 1 (text) and 2 (binary).
///
/// `ProxyProtocolHeader.parse` is fed the bytes received so far and answers
/// `.needMoreData`, `.header(_, consumed:)`, or throws a `ProxyProtocolError`. It never reads
/// more than `maxHeaderBytes`, so a server can bound what it buffers before the header.
public struct ProxyProtocolHeader: Sendable, Equatable {
    public enum Version: Sendable, Equatable {
        case v1, v2
    }

    /// `local`: the proxy speaks for itself (health checks); use the connection's own peer.
    /// `proxy`: the connection is relayed on behalf of `source`.
    public enum Command: Sendable, Equatable {
        case local, proxy
    }

    /// An address and port as declared by the proxy.
    public struct Endpoint: Sendable, Equatable {
        public var address: IPAddress
        public var port: UInt16

        public init(address: IPAddress, port: UInt16) {
            self.address = address
            self.port = port
        }
    }

    /// What `parse` found so far.
    public enum ParseResult: Sendable, Equatable {
        /// A prefix of a valid header; feed more bytes.
        case needMoreData
        /// A complete header, occupying the first `consumed` bytes. The bytes after it belong
        /// to the application protocol.
        case header(ProxyProtocolHeader, consumed: Int)
    }

    /// Longest v1 header, `\r\n` included (the spec's bound).
    public static let maxV1Bytes = 107
    /// Longest v2 address block (the 16-bit length field) accepted. The spec's own address
    /// blocks take at most 216 bytes; the rest is room for TLVs (cloud load balancers add a
    /// few). Longer headers are refused.
    public static let maxV2PayloadBytes = 2048
    /// Most bytes `parse` ever looks at.
    public static let maxHeaderBytes = 16 + maxV2PayloadBytes

    static let v1Signature: [UInt8] = Array("PROXY ".utf8)
    static let v2Signature: [UInt8] = [0x0D, 0x0A, 0x0D, 0x0A, 0x00, 0x0D, 0x0A, 0x51, 0x55, 0x49, 0x54, 0x0A]

    public var version: Version
    public var command: Command
    /// The client, when the proxy declared one. `nil` for v2 `LOCAL`, v1 `UNKNOWN`, and
    /// address families that are not IP (`AF_UNIX`, `AF_UNSPEC`): the connection's own peer
    /// address stands then.
    public var source: Endpoint?
    /// The address the client connected to, when declared.
    public var destination: Endpoint?

    public init(version: Version, command: Command, source: Endpoint? = nil, destination: Endpoint? = nil) {
        self.version = version
        self.command = command
        self.source = source
        self.destination = destination
    }

    /// Parses the start of a connection. Never traps; looks at (and copies) at most
    /// `maxHeaderBytes`.
    public static func parse(_ input: some Collection<UInt8>) throws(ProxyProtocolError) -> ParseResult {
        let bytes = Array(input.prefix(maxHeaderBytes))
        guard let first = bytes.first else { return .needMoreData }
        if first == v1Signature[0] {
            return try parseV1(bytes)
        }
        if first == v2Signature[0] {
            return try parseV2(bytes)
        }
        throw .notProxyProtocol
    }

    // MARK: - Version 1

    private static func parseV1(_ bytes: [UInt8]) throws(ProxyProtocolError) -> ParseResult {
        for (a, b) in zip(bytes, v1Signature) where a != b {
            throw .notProxyProtocol
        }
        // Find CR LF within the first 107 bytes; everything before it printable ASCII.
        var lineEnd: Int?
        var i = 0
        let limit = min(bytes.count, maxV1Bytes)
        while i < limit {
            let b = bytes[i]
            if b == 0x0D {
                guard i + 1 < maxV1Bytes else { throw .headerTooLong }
                guard i + 1 < bytes.count else { return .needMoreData }
                guard bytes[i + 1] == 0x0A else { throw .malformedV1("CR not followed by LF") }
                lineEnd = i
                break
            }
            guard b >= 0x20, b <= 0x7E else { throw .malformedV1("a byte that is not printable ASCII before CRLF") }
            i += 1
        }
        guard let end = lineEnd else {
            if bytes.count >= maxV1Bytes { throw .headerTooLong }
            return .needMoreData
        }
        guard end >= v1Signature.count else { throw .malformedV1("CRLF inside the signature") }
        let line = bytes[v1Signature.count..<end]
        let fields = line.split(separator: 0x20, omittingEmptySubsequences: false)
        guard let proto = fields.first else { throw .malformedV1("no protocol") }
        let consumed = end + 2
        switch Array(proto) {
        case Array("UNKNOWN".utf8):
            // The rest of the line is to be ignored; the connection's own addresses stand.
            return .header(ProxyProtocolHeader(version: .v1, command: .proxy), consumed: consumed)
        case Array("TCP4".utf8), Array("TCP6".utf8):
            let v4 = proto.last == UInt8(ascii: "4")
            guard fields.count == 5 else { throw .malformedV1("expected PROXY \(v4 ? "TCP4" : "TCP6") SRC DST SPORT DPORT") }
            guard let src = v1Address(fields[1], v4: v4), let dst = v1Address(fields[2], v4: v4) else {
                throw .malformedV1("not an \(v4 ? "IPv4" : "IPv6") address")
            }
            guard let sport = v1Port(fields[3]), let dport = v1Port(fields[4]) else { throw .malformedV1("not a port (0…65535)") }
            let header = ProxyProtocolHeader(
                version: .v1, command: .proxy,
                source: Endpoint(address: src, port: sport), destination: Endpoint(address: dst, port: dport))
            return .header(header, consumed: consumed)
        default:
            throw .malformedV1("unknown protocol (TCP4, TCP6 or UNKNOWN)")
        }
    }

    private static func v1Address(_ field: ArraySlice<UInt8>, v4: Bool) -> IPAddress? {
        if v4 {
            return IPAddress.parseV4(field).map { .v4($0) }
        }
        return IPAddress.parseV6(field)
    }

    /// Decimal 0…65535 without leading zeros.
    private static func v1Port(_ field: ArraySlice<UInt8>) -> UInt16? {
        guard !field.isEmpty, field.count <= 5 else { return nil }
        if field.count > 1, field.first == UInt8(ascii: "0") { return nil }
        var value: UInt32 = 0
        for b in field {
            guard b >= UInt8(ascii: "0"), b <= UInt8(ascii: "9") else { return nil }
            value = value * 10 + UInt32(b - UInt8(ascii: "0"))
        }
        return value <= 65535 ? UInt16(truncatingIfNeeded: value) : nil
    }

    // MARK: - Version 2

    private static func parseV2(_ bytes: [UInt8]) throws(ProxyProtocolError) -> ParseResult {
        for (a, b) in zip(bytes, v2Signature) where a != b {
            throw .notProxyProtocol
        }
        guard bytes.count >= 16 else { return .needMoreData }
        let versionCommand = bytes[12]
        guard versionCommand >> 4 == 2 else { throw .unsupportedVersion(versionCommand >> 4) }
        let command: Command
        switch versionCommand & 0x0F {
        case 0: command = .local
        case 1: command = .proxy
        default: throw .unsupportedCommand(versionCommand & 0x0F)
        }
        let familyTransport = bytes[13]
        let family = familyTransport >> 4
        let transport = familyTransport & 0x0F
        guard family <= 3 else { throw .unsupportedFamily(family) }
        guard transport <= 2 else { throw .malformedV2("unknown transport \(transport)") }
        let length = Int(bytes[14]) << 8 | Int(bytes[15])
        guard length <= maxV2PayloadBytes else { throw .headerTooLong }
        guard bytes.count >= 16 + length else { return .needMoreData }
        let consumed = 16 + length
        let payload = bytes[16..<consumed]
        guard command == .proxy, transport != 0 else {
            // LOCAL (health checks) or an unspecified transport: addresses are to be ignored.
            return .header(ProxyProtocolHeader(version: .v2, command: command), consumed: consumed)
        }
        var header = ProxyProtocolHeader(version: .v2, command: .proxy)
        let addressBytes: Int
        switch family {
        case 1:
            addressBytes = 12
            guard length >= addressBytes else { throw .malformedV2("an IPv4 address block takes 12 bytes") }
            let base = payload.startIndex
            if let src = IPAddress(bytes: payload[base..<base + 4]), let dst = IPAddress(bytes: payload[base + 4..<base + 8]) {
                header.source = Endpoint(address: src, port: port(payload, at: base + 8))
                header.destination = Endpoint(address: dst, port: port(payload, at: base + 10))
            }
        case 2:
            addressBytes = 36
            guard length >= addressBytes else { throw .malformedV2("an IPv6 address block takes 36 bytes") }
            let base = payload.startIndex
            if let src = IPAddress(bytes: payload[base..<base + 16]), let dst = IPAddress(bytes: payload[base + 16..<base + 32]) {
                header.source = Endpoint(address: src, port: port(payload, at: base + 32))
                header.destination = Endpoint(address: dst, port: port(payload, at: base + 34))
            }
        case 3:
            addressBytes = 216
            guard length >= addressBytes else { throw .malformedV2("a UNIX address block takes 216 bytes") }
        default:
            addressBytes = 0  // AF_UNSPEC: no addresses.
        }
        // TLVs: type (1), length (2), value; each must fit in the header. Their content is skipped.
        var offset = payload.startIndex + addressBytes
        while offset < payload.endIndex {
            guard payload.endIndex - offset >= 3 else { throw .malformedV2("a truncated TLV") }
            let tlvLength = Int(payload[offset + 1]) << 8 | Int(payload[offset + 2])
            guard payload.endIndex - offset - 3 >= tlvLength else { throw .malformedV2("a TLV longer than the header") }
            offset += 3 + tlvLength
        }
        return .header(header, consumed: consumed)
    }

    private static func port(_ bytes: ArraySlice<UInt8>, at i: Int) -> UInt16 {
        UInt16(bytes[i]) << 8 | UInt16(bytes[i + 1])
    }

    // MARK: - Encoding

    /// The v1 text form, or `nil` when it cannot express this header (a `local` command, or
    /// source and destination missing one of the pair or of different families). A header
    /// without addresses encodes as `PROXY UNKNOWN\r\n`.
    public func encodedV1() -> [UInt8]? {
        guard command == .proxy else { return nil }
        guard let source, let destination else {
            return source == nil && destination == nil ? Array("PROXY UNKNOWN\r\n".utf8) : nil
        }
        guard source.address.isIPv4 == destination.address.isIPv4 else { return nil }
        let line = "PROXY \(source.address.isIPv4 ? "TCP4" : "TCP6") \(source.address) \(destination.address) \(source.port) \(destination.port)\r\n"
        return Array(line.utf8)
    }

    /// The v2 binary form (STREAM transport, no TLVs), or `nil` when source and destination
    /// are not both present (or both absent) with the same family.
    public func encodedV2() -> [UInt8]? {
        var out = Self.v2Signature
        out.append(command == .local ? 0x20 : 0x21)
        guard command == .proxy, let source, let destination else {
            guard command == .local || (source == nil && destination == nil) else { return nil }
            out += [0x00, 0x00, 0x00]
            return out
        }
        guard source.address.isIPv4 == destination.address.isIPv4 else { return nil }
        let v4 = source.address.isIPv4
        out.append(v4 ? 0x11 : 0x21)
        let length = v4 ? 12 : 36
        out += [UInt8(truncatingIfNeeded: length >> 8), UInt8(truncatingIfNeeded: length)]
        out += source.address.bytes
        out += destination.address.bytes
        for p in [source.port, destination.port] {
            out += [UInt8(truncatingIfNeeded: p >> 8), UInt8(truncatingIfNeeded: p)]
        }
        return out
    }
}

/// Why the start of a connection is not an acceptable PROXY protocol header. The connection
/// is to be closed: nothing after it can be trusted to be in sync.
public enum ProxyProtocolError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The bytes start with neither the v1 (`PROXY `) nor the v2 signature.
    case notProxyProtocol
    /// A v1 line without CRLF within 107 bytes, or a v2 length over `maxV2PayloadBytes`.
    case headerTooLong
    case malformedV1(String)
    /// A v2 header whose version nibble is not 2.
    case unsupportedVersion(UInt8)
    /// A v2 command other than LOCAL (0) and PROXY (1).
    case unsupportedCommand(UInt8)
    /// A v2 address family other than UNSPEC, INET, INET6, UNIX.
    case unsupportedFamily(UInt8)
    case malformedV2(String)

    public var description: String {
        switch self {
        case .notProxyProtocol: return "no PROXY protocol signature"
        case .headerTooLong: return "PROXY header too long"
        case .malformedV1(let why): return "malformed PROXY v1 header: \(why)"
        case .unsupportedVersion(let v): return "unsupported PROXY protocol version \(v)"
        case .unsupportedCommand(let c): return "unsupported PROXY v2 command \(c)"
        case .unsupportedFamily(let f): return "unsupported PROXY v2 address family \(f)"
        case .malformedV2(let why): return "malformed PROXY v2 header: \(why)"
        }
    }
}
