import NIOCore
import RelayCore

/// An event as a broker carries it: the encoded Socket.IO packet (for a binary event, its
/// header and attachments) and what delivery needs to know of it. Never its WebSocket frames,
/// its compressed form or its offset variant: the publisher makes those after the broker, once
/// per fan-out, so brokers, their history and other nodes deal in packets only.
public struct Publication: Sendable {
    public var packet: ByteBuffer
    public var attachments: [ByteBuffer]
    /// The event's metrics label (known name or `custom`).
    public var label: String
    /// Under backpressure a queued copy with the same key is replaced by a newer one.
    public var coalescingKey: CoalescingKey?
    /// A receipt forward: never dropped silently.
    public var durable: Bool
    /// The sid of the sender the event skipped (its own broadcast): replays skip it too.
    public var origin: String?
    /// A user-stream event that sockets in this room got from the room already.
    public var skipMembersOf: String?
    /// A user-stream event for the user's sockets that may see this room (members or not).
    public var allowedIn: String?

    public init(
        packet: ByteBuffer, attachments: [ByteBuffer] = [], label: String = "custom", coalescingKey: CoalescingKey? = nil, durable: Bool = false,
        origin: String? = nil, skipMembersOf: String? = nil, allowedIn: String? = nil
    ) {
        self.allowedIn = allowedIn
        self.packet = packet
        self.attachments = attachments
        self.label = label
        self.coalescingKey = coalescingKey
        self.durable = durable
        self.origin = origin
        self.skipMembersOf = skipMembersOf
    }

    /// Bytes of the packet and its attachments.
    public var byteCount: Int { attachments.reduce(packet.readableBytes) { $0 + $1.readableBytes } }
}
