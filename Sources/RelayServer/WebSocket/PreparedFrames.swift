import NIOCore

/// A message's whole WebSocket text frames — header and payload, unmasked as server frames
/// are — built once per fan-out and written as they are to every recipient, past NIO's frame
/// encoder: no per-socket header, allocation or second buffer per delivery.
public final class PreparedFrames: Sendable {
    /// The frame of the plain payload.
    public let plain: ByteBuffer
    /// The RSV1 frame of the fan-out's shared compressed payload (full window, no context
    /// takeover), when there is one.
    public let compressed: ByteBuffer?

    public init(payload: ByteBuffer, compressed: ByteBuffer?, allocator: ByteBufferAllocator = ByteBufferAllocator()) {
        self.plain = Self.textFrame(payload, rsv1: false, allocator: allocator)
        self.compressed = compressed.map { Self.textFrame($0, rsv1: true, allocator: allocator) }
    }

    /// One final text frame (RFC 6455 §5.2): FIN, RSV1 for a compressed message, no mask, and
    /// the shortest length encoding.
    static func textFrame(_ payload: ByteBuffer, rsv1: Bool, allocator: ByteBufferAllocator) -> ByteBuffer {
        let length = payload.readableBytes
        var frame = allocator.buffer(capacity: length + 10)
        frame.writeInteger(UInt8(0x81 | (rsv1 ? 0x40 : 0)))
        if length < 126 {
            frame.writeInteger(UInt8(truncatingIfNeeded: length))
        } else if length <= Int(UInt16.max) {
            frame.writeInteger(UInt8(126))
            frame.writeInteger(UInt16(truncatingIfNeeded: length))
        } else {
            frame.writeInteger(UInt8(127))
            frame.writeInteger(UInt64(truncatingIfNeeded: length))
        }
        var payload = payload
        frame.writeBuffer(&payload)
        return frame
    }
}
