/// A client event, `42[<id>]["name", payload]`, taken apart.
public struct InboundEvent: Equatable, Sendable {
    public var name: String
    /// The first argument after the name; `null` when none was sent.
    public var payload: JSONValue
    public var ackID: Int64?

    public init(name: String, payload: JSONValue, ackID: Int64?) {
        self.name = name
        self.payload = payload
        self.ackID = ackID
    }

    /// Reads an event packet's data. The name must be a string; further arguments past the
    /// first are ignored (Relay's events take one object).
    public init(packet: SocketPacket) throws(ProtocolError) {
        guard packet.type == .event else { throw .unexpectedPacket("expected an event packet") }
        guard case .array(let items)? = packet.data, let first = items.first, case .string(let name) = first else {
            throw .invalidPayload("an event is a JSON array whose first element is the event name")
        }
        self.init(name: name, payload: items.count > 1 ? items[1] : .null, ackID: packet.ackID)
    }
}
