import NIOCore
import RelayCore

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

    /// Frames around a plain frame already made (`encodeEvent`), and the compressed payload's.
    init(plainFrame: ByteBuffer, compressed: ByteBuffer?, allocator: ByteBufferAllocator = ByteBufferAllocator()) {
        self.plain = plainFrame
        self.compressed = compressed.map { Self.textFrame($0, rsv1: true, allocator: allocator) }
    }

    /// The longest header of a server frame: 2 bytes, a 64-bit length, no mask.
    static let maxHeaderBytes = 10

    /// Encodes `42["name",payload]` straight into its text frame, in one buffer: `frame` is the
    /// header and the packet, `packet` a view of the same storage without the header. One
    /// buffer per fan-out instead of a packet buffer and a second one for the frame.
    static func encodeEvent(_ name: String, _ payload: JSONValue, allocator: ByteBufferAllocator = ByteBufferAllocator()) -> (packet: ByteBuffer, frame: ByteBuffer) {
        let bytes = SocketPacket.eventMessage(name: name, payload: payload)
        var frame = allocator.buffer(capacity: maxHeaderBytes + bytes.count)
        writeHeader(length: bytes.count, rsv1: false, into: &frame)
        let headerBytes = frame.readableBytes
        frame.writeBytes(bytes)
        // The packet shares the frame's storage (a slice: no copy).
        let packet = frame.getSlice(at: frame.readerIndex + headerBytes, length: bytes.count) ?? ByteBuffer(bytes: bytes)
        return (packet, frame)
    }

    /// A final text frame's header (RFC 6455 §5.2): FIN, RSV1 for a compressed message, no
    /// mask, and the shortest length encoding.
    static func writeHeader(length: Int, rsv1: Bool, into frame: inout ByteBuffer) {
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
    }

    /// One final text frame (RFC 6455 §5.2): FIN, RSV1 for a compressed message, no mask, and
    /// the shortest length encoding.
    static func textFrame(_ payload: ByteBuffer, rsv1: Bool, allocator: ByteBufferAllocator) -> ByteBuffer {
        let length = payload.readableBytes
        var frame = allocator.buffer(capacity: length + maxHeaderBytes)
        writeHeader(length: length, rsv1: rsv1, into: &frame)
        var payload = payload
        frame.writeBuffer(&payload)
        return frame
    }
}
