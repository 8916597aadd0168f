import NIOCore
import RelayBackends
import RelayCore

/// One encoded server→client message: the Engine.IO text (`42[...]`) in a buffer that is
/// shared, unchanged, by every recipient.
///
/// A value with one reference inside (two once stamped): its fields live in one copy-on-write
/// box, so handing a message to a loop, a queue or the history retains one object instead of
/// each buffer and string it holds. Set a field only while building a message (once per fan-out): setting one
/// on a shared box copies it.
public struct OutboundMessage: Sendable {
    /// The fields. (`@unchecked Sendable`: a box is mutated only through the setters below,
    /// and only while this value holds the sole reference (`isKnownUniquelyReferenced`); a box
    /// that two values or two threads can see is never written again.)
    private final class Box: @unchecked Sendable {
        var bytes: ByteBuffer
        var coalescingKey: CoalescingKey?
        var durable: Bool
        var compressed: ByteBuffer?
        var frames: PreparedFrames?
        var label = "custom"
        var createdAt: UInt64 = 0
        var attachments: [ByteBuffer] = []
        var origin: String?
        var skipMembersOf: String?
        var allowedIn: String?

        init(bytes: ByteBuffer, coalescingKey: CoalescingKey?, durable: Bool) {
            self.bytes = bytes
            self.coalescingKey = coalescingKey
            self.durable = durable
        }

        func copy() -> Box {
            let box = Box(bytes: bytes, coalescingKey: coalescingKey, durable: durable)
            box.compressed = compressed
            box.frames = frames
            box.label = label
            box.createdAt = createdAt
            box.attachments = attachments
            box.origin = origin
            box.skipMembersOf = skipMembersOf
            box.allowedIn = allowedIn
            return box
        }
    }

    private var box: Box
    /// A recoverable event's stream position (and its bytes with the offset), once the broker
    /// gave it one. Beside the box, not in it: stamping a message that the publish still shares
    /// (every recoverable event) then copies no box.
    public var stamp: RecoveryStamp?

    /// The box, copied first unless this value is its only owner.
    private var unique: Box {
        mutating get {
            if !isKnownUniquelyReferenced(&box) { box = box.copy() }
            return box
        }
    }

    /// Setting it (or `compressed`) drops `frames`, which were made from the old bytes.
    public var bytes: ByteBuffer {
        get { box.bytes }
        set {
            let box = unique
            box.bytes = newValue
            box.frames = nil
        }
    }
    /// Set for coalescible events (typing, presence, location updates).
    public var coalescingKey: CoalescingKey? {
        get { box.coalescingKey }
        set { unique.coalescingKey = newValue }
    }
    /// A durable event (receipt forward): never dropped silently.
    public var durable: Bool {
        get { box.durable }
        set { unique.durable = newValue }
    }
    /// The permessage-deflate payload (full window, no context takeover), computed once per
    /// fan-out when deflate clients are connected and the message is over the threshold.
    public var compressed: ByteBuffer? {
        get { box.compressed }
        set {
            let box = unique
            box.compressed = newValue
            box.frames = nil
        }
    }
    /// The whole WebSocket frames of `bytes` and `compressed`, made once per fan-out: with the
    /// packet when the hub encodes an event (one buffer for both), else by `prepareFrames`
    /// just before the hand-off to the loops.
    public var frames: PreparedFrames? {
        get { box.frames }
        set { unique.frames = newValue }
    }
    /// The metrics label of the event (known name, `custom`, or `error`).
    public var label: String {
        get { box.label }
        set { unique.label = newValue }
    }
    /// When it was published (monotonic ns), for the fan-out latency metric.
    public var createdAt: UInt64 {
        get { box.createdAt }
        set { unique.createdAt = newValue }
    }
    /// The binary attachments of a `45` packet (`bytes` is its header): WebSocket binary frames
    /// after the header, `b<base64>` packets over polling. Shared by every recipient.
    public var attachments: [ByteBuffer] {
        get { box.attachments }
        set { unique.attachments = newValue }
    }
    /// The socket id of the sender the event was not sent to (its own broadcast): a replay to
    /// that session after a recovery skips it too.
    public var origin: String? {
        get { box.origin }
        set { unique.origin = newValue }
    }
    /// A user-stream event (a receipt to its author) that sockets in this room got from the
    /// room already: live delivery and replays skip them.
    public var skipMembersOf: String? {
        get { box.skipMembersOf }
        set { unique.skipMembersOf = newValue }
    }
    /// A user-stream event (a receipt to its author's devices only) for the user's sockets that
    /// may see this room, members or not: live delivery and replays hold to it.
    public var allowedIn: String? {
        get { box.allowedIn }
        set { unique.allowedIn = newValue }
    }

    /// Bytes a socket holds for this message (the outbound queue's measure).
    public var byteCount: Int {
        let box = self.box
        return box.attachments.isEmpty ? box.bytes.readableBytes : box.attachments.reduce(box.bytes.readableBytes) { $0 + $1.readableBytes }
    }

    public init(bytes: ByteBuffer, coalescingKey: CoalescingKey? = nil, durable: Bool = false) {
        self.box = Box(bytes: bytes, coalescingKey: coalescingKey, durable: durable)
    }

    /// A message for what a broker carried (another node's event, a history replay), at
    /// `position` when it has one; its frames are made at the hand-off to the loops.
    public init(_ publication: Publication, at position: StreamPosition? = nil) {
        let box = Box(bytes: publication.packet, coalescingKey: publication.coalescingKey, durable: publication.durable)
        box.attachments = publication.attachments
        box.label = publication.label
        box.origin = publication.origin
        box.skipMembersOf = publication.skipMembersOf
        box.allowedIn = publication.allowedIn
        self.box = box
        self.stamp = position.map { RecoveryStamp(position: $0) }
    }

    /// What the broker carries of this message: the packet, not the frames.
    public var publication: Publication {
        let box = self.box
        return Publication(
            packet: box.bytes, attachments: box.attachments, label: box.label, coalescingKey: box.coalescingKey, durable: box.durable,
            origin: box.origin, skipMembersOf: box.skipMembersOf, allowedIn: box.allowedIn)
    }

    /// This message at its stream position (`nil`: as it is).
    func at(_ stream: StreamKey, _ offset: StreamOffset?) -> OutboundMessage {
        guard let offset else { return self }
        var message = self
        message.stamp = RecoveryStamp(position: StreamPosition(stream: stream, offset: offset))
        return message
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
}
