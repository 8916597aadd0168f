/// Socket.IO v5 packet types.
public enum SocketPacketType: UInt8, Sendable {
    case connect = 0
    case disconnect = 1
    case event = 2
    case ack = 3
    case connectError = 4
    case binaryEvent = 5
    case binaryAck = 6

    /// `.binaryEvent` or `.binaryAck`: the packet is followed by binary attachments.
    public var isBinary: Bool { self == .binaryEvent || self == .binaryAck }
}

/// A decoded Socket.IO v5 packet: `<type>[<n>-][<nsp>,][<ackId>][<json>]`.
///
/// `<n>-` is there only for the binary types `5` and `6`: the number of binary attachments that
/// follow the packet as separate messages (see `BinaryPacketAssembler`).
public struct SocketPacket: Equatable, Sendable {
    public var type: SocketPacketType
    public var namespace: String
    public var ackID: Int64?
    public var data: JSONValue?
    /// For `.binaryEvent` and `.binaryAck`: how many attachments the packet announces. Always 0
    /// for the other types (and not encoded for them).
    public var attachmentCount: Int

    public init(type: SocketPacketType, namespace: String = "/", ackID: Int64? = nil, data: JSONValue? = nil, attachmentCount: Int = 0) {
        self.type = type
        self.namespace = namespace
        self.ackID = ackID
        self.data = data
        self.attachmentCount = attachmentCount
    }

    /// Whether the type is `.binaryEvent` or `.binaryAck`.
    public var isBinary: Bool { type.isBinary }

    /// Namespaces and ack ids longer than this are refused rather than scanned.
    static let maxNamespaceLength = 128
    static let maxAckIDDigits = 15
    /// The default limit on a binary packet's attachment count (`<n>` of `5<n>-`).
    public static let defaultMaxAttachments = 10

    /// Decodes the data of an Engine.IO message packet.
    ///
    /// Binary packets (`5<n>-…`, `6<n>-…`): `<n>` must be canonical decimal (no sign, no leading
    /// zero) and at most `maxAttachments` (`.invalidAttachmentCount`, `.tooManyAttachments`);
    /// the data must be a JSON array whose placeholders name `0..<n` once each
    /// (`.invalidPlaceholder`, see `BinaryPlaceholder`); a `6` must carry an ack id. The
    /// attachments themselves are not part of this packet: see `BinaryPacketAssembler`.
    public static func decode(
        _ bytes: ArraySlice<UInt8>, maxDepth: Int = JSONParser.defaultMaxDepth, maxAttachments: Int = defaultMaxAttachments
    ) throws(ProtocolError) -> SocketPacket {
        guard let first = bytes.first else { throw .emptyPacket }
        guard first >= UInt8(ascii: "0"), let type = SocketPacketType(rawValue: first - UInt8(ascii: "0")) else {
            throw .unknownSocketPacketType(first)
        }
        var i = bytes.index(after: bytes.startIndex)
        var attachmentCount = 0
        if type.isBinary {
            switch attachmentPrefix(bytes) {
            case nil: throw .invalidAttachmentCount
            case let (count, end)?:
                guard count <= maxAttachments else { throw .tooManyAttachments(limit: maxAttachments) }
                attachmentCount = count
                i = end
            }
        }
        var namespace = "/"
        if i < bytes.endIndex, bytes[i] == UInt8(ascii: "/") {
            let start = i
            while i < bytes.endIndex, bytes[i] != UInt8(ascii: ",") {
                i += 1
                if i - start > maxNamespaceLength { throw .invalidNamespace }
            }
            // Refuse rather than repair invalid UTF-8: each bad byte would become a 3-byte U+FFFD,
            // so the namespace echoed back (CONNECT_ERROR) could exceed the length limit and not decode.
            guard let validated = String(validating: bytes[start..<i], as: UTF8.self) else { throw .invalidNamespace }
            namespace = validated
            if i < bytes.endIndex { i += 1 }  // the comma
        }
        var ackID: Int64?
        let digitsStart = i
        while i < bytes.endIndex, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(bytes[i]) {
            i += 1
            if i - digitsStart > maxAckIDDigits { throw .invalidAckID }
        }
        if i > digitsStart {
            ackID = Int64(String(decoding: bytes[digitsStart..<i], as: UTF8.self))
        }
        var data: JSONValue?
        if i < bytes.endIndex {
            let result = bytes[i...].withUnsafeBufferPointer { buf in
                Result { () throws(JSONError) in try JSONParser.parse(buf, maxDepth: maxDepth) }
            }
            switch result {
            // No packet type carries a bare number, and after an ack id one is ambiguous: `2 5`
            // (data 5) would re-encode as `25` (ack id 5, no data).
            case .success(.int), .success(.double): throw .invalidPayload("a Socket.IO payload is never a bare number")
            case .success(let value): data = value
            case .failure(.duplicateKey): throw .duplicateKey(ackID: ackID)
            case .failure(let error): throw .invalidJSON(error)
            }
        }
        if type.isBinary {
            guard let data, case .array = data else { throw .invalidPayload("a binary packet's data is a JSON array") }
            if type == .binaryAck, ackID == nil { throw .invalidAckID }
            do {
                try BinaryPlaceholder.validate(data, attachmentCount: attachmentCount)
            } catch {
                throw .invalidPlaceholder(error, ackID: ackID)
            }
        }
        return SocketPacket(type: type, namespace: namespace, ackID: ackID, data: data, attachmentCount: attachmentCount)
    }

    /// Attachment counts with more digits than this are `.tooManyAttachments`, not scanned.
    static let maxAttachmentDigits = 9

    /// The `<n>-` after the type digit of a binary packet: the count (clamped to
    /// `999_999_999` when longer than `maxAttachmentDigits`) and the index after the `-`; `nil`
    /// when it is not canonical decimal digits followed by `-`.
    static func attachmentPrefix(_ bytes: ArraySlice<UInt8>) -> (count: Int, end: ArraySlice<UInt8>.Index)? {
        var i = bytes.index(after: bytes.startIndex)
        let start = i
        var count = 0
        while i < bytes.endIndex, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(bytes[i]) {
            if i - start < maxAttachmentDigits {
                count = count * 10 + Int(bytes[i] - UInt8(ascii: "0"))
            } else {
                count = 999_999_999
            }
            i += 1
        }
        let digits = i - start
        guard digits > 0, i < bytes.endIndex, bytes[i] == UInt8(ascii: "-") else { return nil }
        if digits > 1, bytes[start] == UInt8(ascii: "0") { return nil }
        return (count, i + 1)
    }

    /// Encodes this packet as the data of an Engine.IO message, `4` prefix included. A binary
    /// packet's header is written with `attachmentCount`; its attachments are sent separately
    /// (see `BinaryPacket.encoded()`).
    public func encodedMessage() -> [UInt8] {
        var out: [UInt8] = [UInt8(ascii: "4"), UInt8(ascii: "0") + type.rawValue]
        if isBinary {
            out.append(contentsOf: String(attachmentCount).utf8)
            out.append(UInt8(ascii: "-"))
        }
        if namespace != "/" {
            out.append(contentsOf: namespace.utf8)
            out.append(UInt8(ascii: ","))
        }
        if let ackID { out.append(contentsOf: String(ackID).utf8) }
        if let data { JSONWriter.write(data, into: &out) }
        return out
    }
}

extension SocketPacket {
    /// `42["name",payload]`: an event as an Engine.IO message.
    public static func eventMessage(name: String, payload: JSONValue) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(typicalEventBytes)
        out.append(contentsOf: [UInt8(ascii: "4"), UInt8(ascii: "2"), UInt8(ascii: "[")])
        JSONWriter.writeString(name, into: &out)
        out.append(UInt8(ascii: ","))
        JSONWriter.write(payload, into: &out)
        out.append(UInt8(ascii: "]"))
        return out
    }

    /// Capacity reserved for an encoded event: most chat events fit, so the buffer is allocated
    /// once instead of growing several times.
    public static let typicalEventBytes = 256

    /// `43<id>[payload]`: an acknowledgement as an Engine.IO message.
    public static func ackMessage(id: Int64, payload: JSONValue) -> [UInt8] {
        SocketPacket(type: .ack, ackID: id, data: .array([payload])).encodedMessage()
    }
}
