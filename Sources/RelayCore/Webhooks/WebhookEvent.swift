/// One webhook event (docs/PROTOCOL.md §13): an id that stays the same on every retry and
/// every URL, its type, when it happened (ms since 1970) and its data.
public struct WebhookEvent: Sendable, Equatable {
    /// The lifecycle events Relay itself raises; any other type is an allow-listed client event.
    public static let userOnline = "user:online"
    public static let userOffline = "user:offline"
    public static let roomOccupied = "room:occupied"
    public static let roomVacated = "room:vacated"

    public var id: String
    public var type: String
    public var ts: Int64
    public var data: JSONValue

    public init(id: String, type: String, ts: Int64, data: JSONValue) {
        self.id = id
        self.type = type
        self.ts = ts
        self.data = data
    }

    public var json: JSONValue {
        .object([("id", .string(id)), ("type", .string(type)), ("ts", .int(ts)), ("data", data)])
    }

    public static func online(id: String, user: String, ts: Int64) -> WebhookEvent {
        WebhookEvent(id: id, type: userOnline, ts: ts, data: .object([("user", .string(user))]))
    }

    public static func offline(id: String, user: String, onlineMs: Int64, ts: Int64) -> WebhookEvent {
        WebhookEvent(id: id, type: userOffline, ts: ts, data: .object([("user", .string(user)), ("onlineMs", .int(max(0, onlineMs)))]))
    }

    public static func occupied(id: String, room: String, ts: Int64) -> WebhookEvent {
        WebhookEvent(id: id, type: roomOccupied, ts: ts, data: .object([("room", .string(room))]))
    }

    public static func vacated(id: String, room: String, ts: Int64) -> WebhookEvent {
        WebhookEvent(id: id, type: roomVacated, ts: ts, data: .object([("room", .string(room))]))
    }

    /// An allow-listed client event: its room, its sender and its payload as the room got it.
    public static func client(id: String, name: String, room: String, from: String, payload: JSONValue, ts: Int64) -> WebhookEvent {
        WebhookEvent(id: id, type: name, ts: ts, data: .object([("room", .string(room)), ("from", .string(from)), ("payload", payload)]))
    }

    /// A request body: `{"id":<batch id>,"node":<node>,"events":[…]}` — the same bytes on
    /// every attempt of the batch.
    public static func body(batchID: String, node: String, events: [WebhookEvent]) -> [UInt8] {
        JSONWriter.bytes(.object([("id", .string(batchID)), ("node", .string(node)), ("events", .array(events.map(\.json)))]))
    }
}

extension WebhookEvent {
    /// About what the event weighs queued and sent: its data's JSON plus its fixed fields.
    public var approximateBytes: Int {
        JSONWriter.bytes(data).count + id.utf8.count + type.utf8.count + 48
    }
}
