import NIOCore
import RelayCore

/// One encoded server→client message: the Engine.IO text (`42[...]`) in a buffer that is
/// shared, unchanged, by every recipient.
public struct OutboundMessage: Sendable {
    /// Setting it (or `compressed`) drops `frames`, which were made from the old bytes.
    public var bytes: ByteBuffer { didSet { frames = nil } }
    /// Set for coalescible events (typing, presence, location updates).
    public var coalesceKey: OutboundQueue<OutboundMessage>.CoalesceKey?
    /// A durable event (receipt forward): never dropped silently.
    public var durable: Bool
    /// The permessage-deflate payload (full window, no context takeover), computed once per
    /// fan-out when deflate clients are connected and the message is over the threshold.
    public var compressed: ByteBuffer? { didSet { frames = nil } }
    /// The whole WebSocket frames of `bytes` and `compressed`, made once per fan-out
    /// (`prepareFrames`) just before the hand-off to the loops.
    public var frames: PreparedFrames?
    /// The metrics label of the event (known name, `custom`, or `error`).
    public var label: String = "custom"
    /// When it was published (monotonic ns), for the fan-out latency metric.
    public var createdAt: UInt64 = 0
    /// The binary attachments of a `45` packet (`bytes` is its header): WebSocket binary frames
    /// after the header, `b<base64>` packets over polling. Shared by every recipient.
    public var attachments: [ByteBuffer] = []
    /// A recoverable event's stream position (and its bytes with the offset), once the broker
    /// gave it one.
    public var stamp: RecoveryStamp?
    /// The socket id of the sender the event was not sent to (its own broadcast): a replay to
    /// that session after a recovery skips it too.
    public var origin: String?
    /// A user-stream event (a receipt to its author) that sockets in this room got from the
    /// room already: live delivery and replays skip them.
    public var skipMembersOf: String?

    /// Bytes a socket holds for this message (the outbound queue's measure).
    public var byteCount: Int { attachments.reduce(bytes.readableBytes) { $0 + $1.readableBytes } }

    public init(bytes: ByteBuffer, coalesceKey: OutboundQueue<OutboundMessage>.CoalesceKey? = nil, durable: Bool = false) {
        self.bytes = bytes
        self.coalesceKey = coalesceKey
        self.durable = durable
    }

    /// Makes the WebSocket frames once, for every recipient of this fan-out (a text event; a
    /// binary event's frames are made per socket).
    public mutating func prepareFrames() {
        guard frames == nil, attachments.isEmpty else { return }
        frames = PreparedFrames(payload: bytes, compressed: compressed)
    }

    /// This message with its frames made (`prepareFrames`).
    public func withFrames() -> OutboundMessage {
        var message = self
        message.prepareFrames()
        return message
    }

    /// Encodes `42["name",payload]` once.
    public static func event(_ name: String, _ payload: JSONValue, allocator: ByteBufferAllocator = ByteBufferAllocator()) -> ByteBuffer {
        let bytes = SocketPacket.eventMessage(name: name, payload: payload)
        var buffer = allocator.buffer(capacity: bytes.count)
        buffer.writeBytes(bytes)
        return buffer
    }
}
