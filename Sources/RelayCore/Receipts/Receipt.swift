/// `delivered` or `read`.
public enum ReceiptKind: String, Sendable, CaseIterable {
    case delivered
    case read

    /// The client event that carries this kind.
    public init?(eventName: String) {
        switch eventName {
        case EventPolicyTable.delivered.name: self = .delivered
        case EventPolicyTable.read.name: self = .read
        default: return nil
        }
    }

    /// The event that carries this kind, as the policy table declares it.
    public var policy: EventPolicy { self == .delivered ? EventPolicyTable.delivered : EventPolicyTable.read }

    public var eventName: String { policy.name }
}

/// A receipt before it is stored.
public struct NewReceipt: Equatable, Sendable {
    public var room: String
    public var messageID: String
    public var authorID: String
    public var userID: String
    public var kind: ReceiptKind
    /// Server wall-clock milliseconds.
    public var ts: Int64

    public init(room: String, messageID: String, authorID: String, userID: String, kind: ReceiptKind, ts: Int64) {
        self.room = room
        self.messageID = messageID
        self.authorID = authorID
        self.userID = userID
        self.kind = kind
        self.ts = ts
    }

    /// Validates `{room, messageId, authorId}` from a client. Each is an `Identifier` (NFC, no
    /// control characters); anything else is `invalid_payload`.
    public init(payload: JSONValue, userID: String, kind: ReceiptKind, ts: Int64) throws(RelayError) {
        let room = try EventValidator.room(in: payload)
        let messageID = try EventValidator.identifier(payload, "messageId", maxBytes: EventValidator.maxMessageIDLength)
        let authorID = try EventValidator.identifier(payload, "authorId", maxBytes: EventValidator.maxAuthorIDLength)
        self.init(room: room, messageID: messageID, authorID: authorID, userID: userID, kind: kind, ts: ts)
    }
}

/// A stored receipt. `id` is its cursor: strictly increasing, never reused.
public struct Receipt: Equatable, Sendable {
    public var id: Int64
    public var room: String
    public var messageID: String
    public var authorID: String
    public var userID: String
    public var kind: ReceiptKind
    public var ts: Int64

    public init(id: Int64, _ r: NewReceipt) {
        self.init(id: id, room: r.room, messageID: r.messageID, authorID: r.authorID, userID: r.userID, kind: r.kind, ts: r.ts)
    }

    public init(id: Int64, room: String, messageID: String, authorID: String, userID: String, kind: ReceiptKind, ts: Int64) {
        self.id = id
        self.room = room
        self.messageID = messageID
        self.authorID = authorID
        self.userID = userID
        self.kind = kind
        self.ts = ts
    }

    /// `{"id","room","messageId","authorId","userId","kind","ts"}`: the shape of sync results,
    /// the HTTP API and live forwards.
    public var json: JSONValue {
        .object([
            ("id", .int(id)), ("room", .string(room)), ("messageId", .string(messageID)), ("authorId", .string(authorID)),
            ("userId", .string(userID)), ("kind", .string(kind.rawValue)), ("ts", .int(ts)),
        ])
    }
}
