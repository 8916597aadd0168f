/// Why an inbound Engine.IO or Socket.IO packet was refused.
public enum ProtocolError: Error, Equatable, Sendable {
    case emptyPacket
    case unknownEnginePacketType(UInt8)
    case unknownSocketPacketType(UInt8)
    /// `45`/`46` binary packets: Relay carries JSON events only.
    case binaryNotSupported
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
}
