/// Engine.IO v4 packets as they travel in WebSocket text frames.
///
/// Over WebSocket each frame holds exactly one packet: a type digit followed by its data.
public enum EnginePacket: Equatable, Sendable {
    case open(String)
    case close
    case ping(String)
    case pong(String)
    /// A message packet; its data is a Socket.IO packet.
    case message(ArraySlice<UInt8>)
    case upgrade
    case noop

    /// Decodes one text frame.
    public static func decode(_ frame: ArraySlice<UInt8>) throws(ProtocolError) -> EnginePacket {
        guard let first = frame.first else { throw .emptyPacket }
        let rest = frame.dropFirst()
        switch first {
        case UInt8(ascii: "0"): return .open(String(decoding: rest, as: UTF8.self))
        case UInt8(ascii: "1"): return .close
        case UInt8(ascii: "2"): return .ping(String(decoding: rest, as: UTF8.self))
        case UInt8(ascii: "3"): return .pong(String(decoding: rest, as: UTF8.self))
        case UInt8(ascii: "4"): return .message(rest)
        case UInt8(ascii: "5"): return .upgrade
        case UInt8(ascii: "6"): return .noop
        default: throw .unknownEnginePacketType(first)
        }
    }

    /// The open packet the server sends first: `0{"sid",...}`.
    public static func openPayload(sid: String, upgrades: [String] = [], pingInterval: Int, pingTimeout: Int, maxPayload: Int) -> [UInt8] {
        var out: [UInt8] = [UInt8(ascii: "0")]
        JSONWriter.write(
            .object([
                ("sid", .string(sid)),
                ("upgrades", .array(upgrades.map { .string($0) })),
                ("pingInterval", .int(Int64(pingInterval))),
                ("pingTimeout", .int(Int64(pingTimeout))),
                ("maxPayload", .int(Int64(maxPayload))),
            ]), into: &out)
        return out
    }

    public static let pingFrame: [UInt8] = [UInt8(ascii: "2")]
    public static let closeFrame: [UInt8] = [UInt8(ascii: "1")]
}
