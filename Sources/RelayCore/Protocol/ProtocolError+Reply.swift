extension ProtocolError {
    /// The error reply for a packet refused for this error.
    public var relayError: RelayError {
        switch self {
        case .duplicateKey: return RelayError(.invalidPayload, "a JSON object repeats a key")
        case .tooManyAttachments(let limit): return RelayError(.invalidPacket, "at most \(limit) binary attachments per packet")
        case .invalidAttachmentCount: return RelayError(.invalidPacket, "invalid binary attachment count")
        case .invalidPlaceholder: return RelayError(.invalidPacket, "binary placeholders must be {\"_placeholder\":true,\"num\":k} for k in 0..<count, once each")
        case .unexpectedBinaryMessage: return RelayError(.invalidPacket, "a binary message without a binary packet header")
        case .binaryPacketTooLarge(_, let limit): return RelayError(.payloadTooLarge, "a binary packet is limited to \(limit) bytes")
        case .invalidBase64: return RelayError(.invalidPacket, "a binary attachment is not valid base64")
        case .incompleteBinaryPacket(_, let expected, let received): return RelayError(.invalidPacket, "a binary packet announced \(expected) attachments and got \(received)")
        default: return RelayError(.invalidPacket, "malformed Socket.IO packet")
        }
    }

    /// The ack id of the refused packet, when the error knows it (its reply is then an ack).
    public var ackID: Int64? {
        switch self {
        case .duplicateKey(let id), .invalidPlaceholder(_, let id), .incompleteBinaryPacket(let id, _, _), .binaryPacketTooLarge(let id, _): return id
        default: return nil
        }
    }
}
