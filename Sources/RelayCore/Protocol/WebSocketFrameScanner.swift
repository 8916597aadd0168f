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
    /// Header bytes of the frame being read.
    private var header = WebSocketHeaderBytes()
    /// Payload bytes still to skip before the next header starts.
    private var remaining: UInt64 = 0
    /// The frame being skipped is a close frame (opcode 8).
    private var inClose = false
    /// A whole close frame went by: the peer's side of the closing handshake (RFC 6455 §7.1.2)
    /// is done, and the relay may close the connection.
    public private(set) var sawClose = false

    public init(limit: Int) {
        self.limit = UInt64(clamping: max(0, limit))
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
            let complete = header.append(bytes[index])
            index = bytes.index(after: index)
            guard complete else { continue }
            let length = header.payloadLength
            inClose = header.opcode == 0x8
            header.reset()
            if length > limit { return .tooLarge(declared: length) }
            remaining = length
            if length == 0, inClose { sawClose = true }
        }
        return .ok
    }
}
