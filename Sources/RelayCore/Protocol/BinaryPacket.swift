/// A complete Socket.IO binary packet: the `5`/`6` header and its attachments, in order.
///
/// Attachment `k` is the bytes that the placeholder `{"_placeholder":true,"num":k}` in
/// `header.data` stands for. Relay never reconstructs the JSON with the bytes in it: it forwards
/// the header's JSON (placeholders included) and the attachments unchanged.
public struct BinaryPacket: Equatable, Sendable {
    /// `type` is `.binaryEvent` or `.binaryAck`; `attachmentCount == attachments.count`.
    public var header: SocketPacket
    public var attachments: [[UInt8]]

    public init(header: SocketPacket, attachments: [[UInt8]]) {
        self.header = header
        self.attachments = attachments
    }

    /// `45<n>-["name",payload]`: an event whose payload holds the placeholders of `attachments`.
    public static func event(name: String, payload: JSONValue, attachments: [[UInt8]], namespace: String = "/") -> BinaryPacket {
        BinaryPacket(
            header: SocketPacket(
                type: .binaryEvent, namespace: namespace, data: .array([.string(name), payload]), attachmentCount: attachments.count),
            attachments: attachments)
    }

    /// `46<n>-<id>[payload]`: an acknowledgement whose payload holds the placeholders.
    public static func ack(id: Int64, payload: JSONValue, attachments: [[UInt8]], namespace: String = "/") -> BinaryPacket {
        BinaryPacket(
            header: SocketPacket(type: .binaryAck, namespace: namespace, ackID: id, data: .array([payload]), attachmentCount: attachments.count),
            attachments: attachments)
    }

    /// The header's canonical Socket.IO text (without the Engine.IO `4`) plus every attachment,
    /// in bytes: the measure `BinaryPacketAssembler` holds against its `maxPayload` budget (it
    /// counts the header as received, which may have extra whitespace).
    public var byteCount: Int {
        var header = self.header
        header.attachmentCount = attachments.count
        return attachments.reduce(header.encodedMessage().count - 1) { $0 + $1.count }
    }

    /// What every recipient pays for the packet on the costliest transport (long-polling: the
    /// Engine.IO header, then `\x1e` `b<base64>` per attachment): the measure of an event's size.
    public var recipientByteCount: Int {
        var header = self.header
        header.attachmentCount = attachments.count
        return WireSize.polling(text: header.encodedMessage().count, attachments: attachments.map(\.count))
    }

    /// Encodes the packet once for fan-out. The header is written with `attachments.count` as
    /// its count, whatever `header.attachmentCount` says.
    public func encoded() -> EncodedBinaryPacket {
        var header = self.header
        header.attachmentCount = attachments.count
        return EncodedBinaryPacket(header: header.encodedMessage(), attachments: attachments)
    }
}

/// A binary packet encoded for the wire, once, for every recipient and both transports.
///
/// - WebSocket: `header` as one text frame, then each attachment as one binary frame, in order,
///   with nothing in between on that socket.
/// - Long-polling: `pollingPackets()` (or `pollingPayload()`): the header, then `b<base64>` for
///   each attachment, as Engine.IO packets of one payload separated by `0x1E`.
public struct EncodedBinaryPacket: Equatable, Sendable {
    /// The Engine.IO message `45<n>-…` / `46<n>-…`, with its `4` prefix.
    public let header: [UInt8]
    /// The attachments' bytes, unchanged: each one WebSocket binary frame.
    public let attachments: [[UInt8]]

    public init(header: [UInt8], attachments: [[UInt8]]) {
        self.header = header
        self.attachments = attachments
    }

    /// Bytes on a WebSocket, frame headers aside: the header plus every attachment.
    public var webSocketByteCount: Int { attachments.reduce(header.count) { $0 + $1.count } }

    /// The Engine.IO polling packet for one attachment: `b` followed by its standard base64.
    public static func pollingPacket<Bytes: Collection>(forAttachment bytes: Bytes) -> [UInt8] where Bytes.Element == UInt8 {
        var out: [UInt8] = [UInt8(ascii: "b")]
        Base64.encode(bytes, into: &out)
        return out
    }

    /// The Engine.IO packets for long-polling: `header`, then `b<base64>` per attachment.
    public func pollingPackets() -> [[UInt8]] {
        [header] + attachments.map { Self.pollingPacket(forAttachment: $0) }
    }

    /// The packets of `pollingPackets()` joined with the record separator `0x1E`, as one
    /// Engine.IO v4 polling payload (or a part of one: join it to others with `0x1E`).
    public func pollingPayload() -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(attachments.reduce(header.count) { $0 + 2 + Base64.encodedLength(of: $1.count) })
        out.append(contentsOf: header)
        for attachment in attachments {
            out.append(0x1E)
            out.append(UInt8(ascii: "b"))
            Base64.encode(attachment, into: &out)
        }
        return out
    }
}

/// Puts inbound binary packets together: a `45`/`46` header message, then its attachments.
///
/// Feed it, in arrival order, the data of every Engine.IO **message** of one socket
/// (`receiveText`, the bytes after the `4`) and every binary message (`receiveBinary` for a
/// WebSocket binary frame, `receiveBase64` for a polling `b<base64>` packet, without the `b`).
/// Engine.IO pings, pongs and noops do not concern it. It decodes text messages itself (so it
/// sees every one), with the same errors as `SocketPacket.decode`.
///
/// Limits: a header announces at most `maxAttachments` attachments, and the header (its
/// Socket.IO text) plus every attachment must fit in `maxPayload` bytes. The budget is checked
/// before each attachment is kept, so the assembler never holds more than `maxPayload` bytes.
///
/// After an error the assembler is ready for the next packet. When the refused header or the
/// packet that became too large still has attachments on their way, it **skips** them:
/// `receiveBinary`/`receiveBase64` answer `.skipped(remaining:)` for those, instead of an
/// `.unexpectedBinaryMessage` error for each, so one bad packet costs the client one error. A
/// text message ends the skipping and is handled normally.
public struct BinaryPacketAssembler: Sendable {
    /// What one message amounted to.
    public enum Output: Equatable, Sendable {
        /// A complete packet of a non-binary type (`40`…`44`).
        case packet(SocketPacket)
        /// A complete binary packet with all its attachments (at once for a `5`/`6` header with
        /// no attachments).
        case binaryPacket(BinaryPacket)
        /// A binary header or an attachment was taken; `remaining` more attachments are expected.
        case awaitingAttachments(remaining: Int)
        /// An attachment of a refused packet was discarded; `remaining` more will be.
        case skipped(remaining: Int)
    }

    private enum State: Sendable {
        case idle
        case collecting(header: SocketPacket, attachments: [[UInt8]], bytes: Int)
        case skipping(remaining: Int)
    }

    public let maxPayload: Int
    public let maxAttachments: Int
    public let maxDepth: Int
    private var state: State = .idle

    /// `maxPayload` is the server's Engine.IO `maxPayload` (`--max-payload`).
    public init(maxPayload: Int, maxAttachments: Int = SocketPacket.defaultMaxAttachments, maxDepth: Int = JSONParser.defaultMaxDepth) {
        self.maxPayload = maxPayload
        self.maxAttachments = maxAttachments
        self.maxDepth = maxDepth
    }

    /// Whether a binary packet is waiting for attachments.
    public var isAwaitingAttachments: Bool {
        if case .collecting = state { return true }
        return false
    }

    /// Attachments still expected by the packet being collected (0 when none is).
    public var remainingAttachments: Int {
        if case .collecting(let header, let attachments, _) = state { return header.attachmentCount - attachments.count }
        return 0
    }

    /// Attachments of a refused packet still to be skipped.
    public var remainingSkips: Int {
        if case .skipping(let remaining) = state { return remaining }
        return 0
    }

    /// How many more bytes of attachments the packet being collected may take, or `nil` when
    /// none is being collected. A server can refuse a binary frame whose header declares more,
    /// before reading its payload.
    public var remainingBudget: Int? {
        if case .collecting(_, _, let bytes) = state { return maxPayload - bytes }
        return nil
    }

    /// Drops any partial packet (e.g. when the socket closes).
    public mutating func reset() { state = .idle }

    /// The data of one Engine.IO message (after the `4`).
    ///
    /// Throws `.incompleteBinaryPacket` when a binary packet was still expecting attachments:
    /// that packet is abandoned and the text is **not** decoded; the assembler is then idle, so
    /// the caller that wants the text handled passes it again. Otherwise throws what
    /// `SocketPacket.decode` throws, and `.binaryPacketTooLarge` for a binary header alone over
    /// `maxPayload`.
    public mutating func receiveText(_ data: ArraySlice<UInt8>) throws(ProtocolError) -> Output {
        switch state {
        case .collecting(let header, let attachments, _):
            state = .idle
            throw .incompleteBinaryPacket(ackID: header.ackID, expected: header.attachmentCount, received: attachments.count)
        case .skipping:
            state = .idle
        case .idle:
            break
        }
        let packet: SocketPacket
        do {
            packet = try SocketPacket.decode(data, maxDepth: maxDepth, maxAttachments: maxAttachments)
        } catch {
            skipAttachments(ofRefusedHeader: data)
            throw error
        }
        guard packet.isBinary else { return .packet(packet) }
        guard data.count <= maxPayload else {
            skip(packet.attachmentCount)
            throw .binaryPacketTooLarge(ackID: packet.ackID, limit: maxPayload)
        }
        if packet.attachmentCount == 0 { return .binaryPacket(BinaryPacket(header: packet, attachments: [])) }
        state = .collecting(header: packet, attachments: [], bytes: data.count)
        return .awaitingAttachments(remaining: packet.attachmentCount)
    }

    /// One binary message: a WebSocket binary frame's payload.
    public mutating func receiveBinary(_ bytes: [UInt8]) throws(ProtocolError) -> Output {
        try receive(count: bytes.count) { bytes }
    }

    /// One polling binary packet's base64 text (after the `b`). Its decoded size is checked
    /// against the budget before it is decoded.
    public mutating func receiveBase64(_ text: ArraySlice<UInt8>) throws(ProtocolError) -> Output {
        // Idle: refused; skipping: discarded unread.
        guard case .collecting(let header, let attachments, _) = state else { return try receive(count: 0) { [] } }
        guard let length = Base64.decodedLength(of: text) else {
            skip(header.attachmentCount - attachments.count - 1)
            throw .invalidBase64
        }
        return try receive(count: length) { () throws(ProtocolError) in
            guard let bytes = Base64.decode(text) else { throw .invalidBase64 }
            return bytes
        }
    }

    /// Takes one attachment of `count` bytes, produced by `bytes` only once it fits.
    private mutating func receive(count: Int, _ bytes: () throws(ProtocolError) -> [UInt8]) throws(ProtocolError) -> Output {
        switch state {
        case .idle:
            throw .unexpectedBinaryMessage
        case .skipping(let remaining):
            state = remaining > 1 ? .skipping(remaining: remaining - 1) : .idle
            return .skipped(remaining: remaining - 1)
        case .collecting(let header, var attachments, let used):
            guard count <= maxPayload - used else {
                skip(header.attachmentCount - attachments.count - 1)
                throw .binaryPacketTooLarge(ackID: header.ackID, limit: maxPayload)
            }
            state = .idle  // no copy-on-write of `attachments` while appending
            let attachment: [UInt8]
            do {
                attachment = try bytes()
            } catch {
                skip(header.attachmentCount - attachments.count - 1)
                throw error
            }
            attachments.append(attachment)
            let remaining = header.attachmentCount - attachments.count
            if remaining == 0 { return .binaryPacket(BinaryPacket(header: header, attachments: attachments)) }
            state = .collecting(header: header, attachments: attachments, bytes: used + count)
            return .awaitingAttachments(remaining: remaining)
        }
    }

    private mutating func skip(_ count: Int) {
        state = count > 0 ? .skipping(remaining: count) : .idle
    }

    /// After a refused `5`/`6` header whose count could be read, its attachments are skipped
    /// (a header refused before it was parsed, as before CONNECT, too).
    public mutating func skipAttachments(ofRefusedHeader data: ArraySlice<UInt8>) {
        guard let first = data.first, first == UInt8(ascii: "5") || first == UInt8(ascii: "6"),
            let (count, _) = SocketPacket.attachmentPrefix(data)
        else { return }
        skip(count)
    }
}
