/// A client event, `42[<id>]["name", payload]` or `45<n>-[<id>]["name", payload]` with its
/// attachments, taken apart.
public struct InboundEvent: Equatable, Sendable {
    public var name: String
    /// The first argument after the name; `null` when none was sent. For a binary event it holds
    /// the placeholders of `attachments` (see `BinaryPlaceholder`).
    public var payload: JSONValue
    public var ackID: Int64?
    /// A binary event's attachments, in placeholder order; empty for a `42` event.
    public var attachments: [[UInt8]]

    public init(name: String, payload: JSONValue, ackID: Int64?, attachments: [[UInt8]] = []) {
        self.name = name
        self.payload = payload
        self.ackID = ackID
        self.attachments = attachments
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

    /// Reads a complete binary event (`45`). Like a `42` event, further arguments past the first
    /// are ignored, so every placeholder must be inside the name's first argument, the payload:
    /// an attachment referenced from elsewhere would be forwarded without its placeholder.
    public init(binary packet: BinaryPacket) throws(ProtocolError) {
        guard packet.header.type == .binaryEvent else { throw .unexpectedPacket("expected a binary event packet") }
        var text = packet.header
        text.type = .event
        try self.init(packet: text)
        guard BinaryPlaceholder.count(in: payload) == packet.attachments.count else {
            throw .invalidPayload("a binary event's attachments are placeholders inside its payload (the argument after the name)")
        }
        attachments = packet.attachments
    }
}
