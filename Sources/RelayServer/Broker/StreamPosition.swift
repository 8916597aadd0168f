import NIOCore
import RelayCore

/// Where a recoverable event sits: its stream and offset.
public struct StreamPosition: Sendable, Hashable {
    public var stream: StreamKey
    public var offset: StreamOffset

    public init(stream: StreamKey, offset: StreamOffset) {
        self.stream = stream
        self.offset = offset
    }

    /// What a client sees: `<ms>-<seq>:<tag>`.
    public var wire: WireOffset { WireOffset(offset, stream: stream) }
}

/// A recoverable event's position, and its bytes for sockets that take offsets: the same packet
/// with the offset as its last argument (`42["name",{…},"<offset>"]`). Made once per message and
/// node, shared by every such socket. A class, so a message carries one pointer for it.
public final class RecoveryStamp: Sendable {
    public let position: StreamPosition
    /// `nil` until made (only when sockets that take offsets are connected).
    public let bytes: ByteBuffer?
    /// Compressed once when deflate clients that take offsets are connected.
    public let compressed: ByteBuffer?
    /// The WebSocket frames of `bytes` and `compressed`, made with them.
    public let frames: PreparedFrames?

    init(position: StreamPosition, bytes: ByteBuffer? = nil, compressed: ByteBuffer? = nil) {
        self.position = position
        self.bytes = bytes
        self.compressed = compressed
        self.frames = bytes.map { PreparedFrames(payload: $0, compressed: compressed) }
    }

    /// Inserts `,"<offset>"` before the packet's closing `]`; `nil` if it has none.
    static func bytes(of packet: ByteBuffer, offset: WireOffset, allocator: ByteBufferAllocator = ByteBufferAllocator()) -> ByteBuffer? {
        let view = packet.readableBytesView
        guard let last = view.last, last == UInt8(ascii: "]") else { return nil }
        let text = ",\"\(offset)\"]"
        var out = allocator.buffer(capacity: view.count + text.utf8.count)
        out.writeBytes(view.dropLast())
        out.writeString(text)
        return out
    }
}
