/// Follows the frame boundaries of a client's WebSocket byte stream without buffering it, so
/// that a frame whose declared length is over a limit can be refused as soon as its header
/// arrives — before the frame decoder would buffer the whole payload.
///
/// Relay uses it while a socket is not yet authenticated (a small limit until CONNECT
/// succeeds): NIO's frame decoder only enforces one fixed `maxFrameSize`, the large
/// post-authentication one.
public struct WebSocketFrameScanner: Sendable {
    /// What the scanner saw in the bytes fed so far.
    public enum Verdict: Equatable, Sendable {
        /// Every complete frame header so far declared at most `limit` payload bytes.
        case ok
        /// A frame declared `declared` payload bytes, more than the limit.
        case tooLarge(declared: UInt64)
    }

    /// Largest payload a single frame may declare.
    public var limit: UInt64
    /// Header bytes of the frame being read (at most 14).
    private var header: [UInt8] = []
    /// Payload bytes still to skip before the next header starts.
    private var remaining: UInt64 = 0
    /// The frame being skipped is a close frame (opcode 8).
    private var inClose = false
    /// A whole close frame went by: the peer's side of the closing handshake (RFC 6455 §7.1.2)
    /// is done, and the relay may close the connection.
    public private(set) var sawClose = false

    public init(limit: Int) {
        self.limit = UInt64(clamping: max(0, limit))
        header.reserveCapacity(14)
    }

    /// Feeds the next bytes of the stream.
    public mutating func scan<Bytes: Collection>(_ bytes: Bytes) -> Verdict where Bytes.Element == UInt8 {
        var index = bytes.startIndex
        while index != bytes.endIndex {
            if remaining > 0 {
                let available = UInt64(bytes.distance(from: index, to: bytes.endIndex))
                let skip = min(remaining, available)
                remaining -= skip
                // `skip` ≤ available, which came from an Int distance: it fits in Int.
                index = bytes.index(index, offsetBy: Int(skip))
                if remaining == 0, inClose { sawClose = true }
                continue
            }
            header.append(bytes[index])
            index = bytes.index(after: index)
            guard let needed = Self.headerLength(header), header.count == needed else { continue }
            let length = Self.payloadLength(header)
            inClose = header[0] & 0x0F == 0x8
            header.removeAll(keepingCapacity: true)
            if length > limit { return .tooLarge(declared: length) }
            remaining = length
            if length == 0, inClose { sawClose = true }
        }
        return .ok
    }

    /// The full header length once the first two bytes are known (2, 4 or 10, plus 4 for the
    /// mask key); `nil` before that.
    static func headerLength(_ header: [UInt8]) -> Int? {
        guard header.count >= 2 else { return nil }
        let masked = header[1] & 0x80 != 0
        let base: Int
        switch header[1] & 0x7F {
        case 126: base = 4
        case 127: base = 10
        default: base = 2
        }
        return base + (masked ? 4 : 0)
    }

    /// The declared payload length of a complete header.
    static func payloadLength(_ header: [UInt8]) -> UInt64 {
        switch header[1] & 0x7F {
        case 126:
            return UInt64(header[2]) << 8 | UInt64(header[3])
        case 127:
            var value: UInt64 = 0
            for byte in header[2..<10] { value = value << 8 | UInt64(byte) }
            return value
        case let short:
            return UInt64(short)
        }
    }
}
