import NIOCore
import RelayBackends
import RelayCore

/// A recoverable event's position, and what sockets that take offsets get instead of the
/// event: the same packet with the offset as its last argument (`42["name",{…},"<offset>"]`),
/// framed. Made once per message and node, shared by every such socket. A class, so a message
/// carries one pointer for it.
public final class RecoveryStamp: Sendable {
    public let position: StreamPosition
    /// The message with the offset, `nil` until made (only when sockets that take offsets are
    /// connected): its bytes, compressed once when deflate clients that take offsets are
    /// connected, and its frames. It has no stamp of its own.
    public let offsetMessage: OutboundMessage?

    init(position: StreamPosition) {
        self.position = position
        self.offsetMessage = nil
    }

    /// The stamp of `message` with its offset variant: `bytes` (and `compressed`) in place of the
    /// message's own.
    init(position: StreamPosition, of message: OutboundMessage, bytes: ByteBuffer, compressed: ByteBuffer?) {
        self.position = position
        var variant = message
        variant.stamp = nil
        variant.bytes = bytes
        variant.compressed = compressed
        variant.prepareFrames()
        self.offsetMessage = variant
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
