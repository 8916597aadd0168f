/// Why an inbound Engine.IO or Socket.IO packet was refused.
public enum ProtocolError: Error, Equatable, Sendable {
    case emptyPacket
    case unknownEnginePacketType(UInt8)
    case unknownSocketPacketType(UInt8)
    case invalidAckID
    case invalidNamespace
    case invalidJSON(JSONError)
    /// The payload is well-formed JSON except for an object with a repeated key: answered with
    /// `invalid_payload` (to the ack id, when the packet has one), never forwarded.
    case duplicateKey(ackID: Int64?)
    /// The packet type requires a payload of a given JSON shape that was not there.
    case invalidPayload(String)
    /// A packet the client may not send (e.g. `0` open, `44` connect error).
    case unexpectedPacket(String)

    // MARK: Binary packets (`45`/`46` and their attachments)

    /// The `<n>-` attachment count of a `5`/`6` packet is missing, is not decimal digits followed
    /// by `-`, or has a leading zero.
    case invalidAttachmentCount
    /// A `5`/`6` packet announces more attachments than the limit (see
    /// `SocketPacket.defaultMaxAttachments`).
    case tooManyAttachments(limit: Int)
    /// A placeholder `{"_placeholder":true,"num":k}` is malformed, out of range, repeated, or
    /// one of the announced attachments has none. `ackID` is the packet's, so that an event that
    /// asked for an ack can still get exactly one.
    case invalidPlaceholder(PlaceholderError, ackID: Int64?)
    /// A text message arrived while a binary packet still expected attachments. The binary
    /// packet (`ackID`, `expected` attachments, `received` so far) is abandoned; the text message
    /// itself was not looked at (see `BinaryPacketAssembler.receiveText`).
    case incompleteBinaryPacket(ackID: Int64?, expected: Int, received: Int)
    /// A binary message (WebSocket binary frame, polling `b` packet) arrived while no binary
    /// packet expected one.
    case unexpectedBinaryMessage
    /// A binary packet's header plus attachments would exceed `limit` bytes; refused before the
    /// attachment that crosses the limit is kept.
    case binaryPacketTooLarge(ackID: Int64?, limit: Int)
    /// A polling `b` packet that is not canonical standard base64 (RFC 4648 §4).
    case invalidBase64
}

/// What is wrong with the attachment placeholders of a binary packet.
public enum PlaceholderError: Error, Equatable, Sendable {
    /// An object with a `_placeholder` key that is not exactly `{"_placeholder":true,"num":<int>}`.
    case malformed
    /// `num` is not in `0..<count`.
    case outOfRange(num: Int64, count: Int)
    /// Two placeholders name the same attachment.
    case duplicate(num: Int)
    /// No placeholder names attachment `num`.
    case missing(num: Int)
}
