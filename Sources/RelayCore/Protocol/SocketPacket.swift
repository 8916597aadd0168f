/// Socket.IO v5 packet types.
public enum SocketPacketType: UInt8, Sendable {
    case connect = 0
    case disconnect = 1
    case event = 2
    case ack = 3
    case connectError = 4
    case binaryEvent = 5
    case binaryAck = 6
}

/// A decoded Socket.IO v5 packet: `<type>[<nsp>,][<ackId>][<json>]`.
public struct SocketPacket: Equatable, Sendable {
    public var type: SocketPacketType
    public var namespace: String
    public var ackID: Int64?
    public var data: JSONValue?

    public init(type: SocketPacketType, namespace: String = "/", ackID: Int64? = nil, data: JSONValue? = nil) {
        self.type = type
        self.namespace = namespace
        self.ackID = ackID
        self.data = data
    }

    /// Namespaces and ack ids longer than this are refused rather than scanned.
    static let maxNamespaceLength = 128
    static let maxAckIDDigits = 15

    /// Decodes the data of an Engine.IO message packet.
    public static func decode(_ bytes: ArraySlice<UInt8>, maxDepth: Int = JSONParser.defaultMaxDepth) throws(ProtocolError) -> SocketPacket {
        guard let first = bytes.first else { throw .emptyPacket }
        guard first >= UInt8(ascii: "0"), let type = SocketPacketType(rawValue: first - UInt8(ascii: "0")) else {
            throw .unknownSocketPacketType(first)
        }
        if type == .binaryEvent || type == .binaryAck { throw .binaryNotSupported }
        var i = bytes.index(after: bytes.startIndex)
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
        return SocketPacket(type: type, namespace: namespace, ackID: ackID, data: data)
    }

    /// Encodes this packet as the data of an Engine.IO message, `4` prefix included.
    public func encodedMessage() -> [UInt8] {
        var out: [UInt8] = [UInt8(ascii: "4"), UInt8(ascii: "0") + type.rawValue]
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
        var out: [UInt8] = [UInt8(ascii: "4"), UInt8(ascii: "2"), UInt8(ascii: "[")]
        JSONWriter.writeString(name, into: &out)
        out.append(UInt8(ascii: ","))
        JSONWriter.write(payload, into: &out)
        out.append(UInt8(ascii: "]"))
        return out
    }

    /// `43<id>[payload]`: an acknowledgement as an Engine.IO message.
    public static func ackMessage(id: Int64, payload: JSONValue) -> [UInt8] {
        SocketPacket(type: .ack, ackID: id, data: .array([payload])).encodedMessage()
    }
}
