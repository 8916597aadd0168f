import Atomics
import NIOCore
import RelayBackends
import RelayCore

/// A recoverable event's position, and what sockets that take offsets get instead of the
/// event: the same packet with the offset as its last argument (`42["name",{…},"<offset>"]`),
/// framed. A class, so a message carries one pointer for it.
///
/// The offset variant is made once per message and node, by the first socket that takes
/// offsets to get the message, on its own event loop — never under the broker's stream lock,
/// where the offset was given (a publish holds that lock only to number the event and post it).
/// Two loops that race make it twice and keep the first; every such socket shares it.
public final class RecoveryStamp: Sendable {
    /// How the offset variant is made, decided at publish time from the audience.
    struct VariantPlan: Sendable {
        /// Compress the variant when it is at least this long (deflate clients that take offsets
        /// are connected, the message has no attachments); `nil`: never.
        let compressAtLeast: Int?
        let deflaters: DeflaterPool
    }

    /// The offset variant, once made: an `OutboundMessage` without a stamp of its own.
    final class Variant: Sendable {
        let message: OutboundMessage
        init(_ message: OutboundMessage) { self.message = message }
    }

    public let position: StreamPosition
    /// `nil`: no socket took offsets when the fan-out started; each such socket that turns up
    /// makes its own bytes.
    let plan: VariantPlan?
    private let variant = ManagedAtomicLazyReference<Variant>()

    init(position: StreamPosition, plan: VariantPlan? = nil) {
        self.position = position
        self.plan = plan
    }

    /// The variant of `message` (the message this stamp is on), made on first use; `nil`
    /// without a plan or when the packet has no closing `]`.
    func offsetMessage(of message: OutboundMessage) -> OutboundMessage? {
        if let made = variant.load() { return made.message }
        guard let plan, let bytes = Self.bytes(of: message.bytes, offset: position.wire) else { return nil }
        var made = message
        made.stamp = nil
        made.bytes = bytes
        made.compressed = plan.compressAtLeast.flatMap { bytes.readableBytes >= $0 ? plan.deflaters.compress(bytes) : nil }
        made.prepareFrames()
        return variant.storeIfNilThenLoad(Variant(made)).message
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
