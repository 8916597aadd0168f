/// A client event after the policy table and its validator: what the server executes, routed by
/// type (never by matching the name again).
public enum ClientEvent: Equatable, Sendable {
    /// A validated event for the room, minus the sending socket: stamped with `from`/`ts` and
    /// fanned out.
    public struct Broadcast: Equatable, Sendable {
        /// The event's entry in the policy table (custom events: `EventPolicyTable.custom`).
        public var policy: EventPolicy
        public var room: String
        /// The validated payload, not yet stamped.
        public var payload: JSONValue
        /// From the policy table: the key under which a queued copy may be replaced.
        public var coalescingKey: CoalescingKey?
        /// Binary attachments (custom events only), forwarded with the same bytes; the payload
        /// holds their placeholders.
        public var attachments: [[UInt8]] = []

        public var name: String { policy.name }
    }

    case join(room: String)
    case leave(room: String)
    case presence(room: String)
    case typing(room: String, isTyping: Bool)
    case reaction(Broadcast)
    case shareLive(Broadcast, durationSec: Int64)
    case locationUpdate(Broadcast)
    case locationStop(Broadcast)
    case custom(Broadcast)
    /// A durable receipt: stored, acked after commit, then forwarded.
    case receipt(NewReceipt)
    /// Up to `maxReceiptBatch` receipts of one kind in one room (`items`): one group commit, one
    /// ack, forwards grouped per recipient.
    case receiptBatch(room: String, kind: ReceiptKind, receipts: [NewReceipt])
    case receiptSync(since: Int64, limit: Int)
    /// A new token for the same user, before the current one expires.
    case authRefresh(token: String)
    /// The room's recoverable events after `offset` (catch-up).
    case roomSync(room: String, offset: WireOffset, limit: Int)

    /// The event's name, for error replies and logs.
    public var name: String {
        switch self {
        case .join: return EventPolicyTable.roomJoin.name
        case .leave: return EventPolicyTable.roomLeave.name
        case .presence: return EventPolicyTable.presenceList.name
        case .typing(_, let isTyping): return ServerEvent.typing(isTyping).name
        case .reaction(let b), .shareLive(let b, _), .locationUpdate(let b), .locationStop(let b), .custom(let b): return b.name
        case .receipt(let r): return r.kind.eventName
        case .receiptBatch(_, let kind, _): return kind.eventName
        case .receiptSync: return EventPolicyTable.receiptSync.name
        case .roomSync: return EventPolicyTable.roomSync.name
        case .authRefresh: return EventPolicyTable.authRefresh.name
        }
    }

    /// Receipts one `message:delivered` / `message:read` may carry in `items`.
    public static let maxReceiptBatch = 100
    public static let maxRoomSyncPage = 500
    public static let defaultRoomSyncPage = 100
    public static let maxSyncPage = 1000
    public static let defaultSyncPage = 100

    /// `{room, messageId, authorId}`, or `{room, items: [{messageId, authorId}…]}` (1…100 items;
    /// an item repeated in one batch counts once).
    static func receipts(_ payload: JSONValue, userID: String, kind: ReceiptKind, ts: Int64) throws(RelayError) -> ClientEvent {
        guard let items = payload["items"] else { return .receipt(try NewReceipt(payload: payload, userID: userID, kind: kind, ts: ts)) }
        let room = try EventValidator.room(in: payload)
        guard payload["messageId"] == nil, payload["authorId"] == nil else {
            throw RelayError(.invalidPayload, "a batch carries its receipts in items only")
        }
        guard case .array(let list) = items, !list.isEmpty, list.count <= maxReceiptBatch else {
            throw RelayError(.invalidPayload, "items must be an array of 1...\(maxReceiptBatch) {messageId, authorId}")
        }
        var receipts: [NewReceipt] = []
        var seen = Set<String>()
        for item in list {
            guard item.isObject else { throw RelayError(.invalidPayload, "items must be {messageId, authorId} objects") }
            let receipt = try NewReceipt(payload: item.setting("room", to: .string(room)), userID: userID, kind: kind, ts: ts)
            if seen.insert(receipt.messageID).inserted { receipts.append(receipt) }
        }
        return .receiptBatch(room: room, kind: kind, receipts: receipts)
    }

    /// Validates `event` under `policy` (from `EventPolicyTable.policy(forClientEvent:)`).
    /// - Parameters:
    ///   - userID: the sender, for receipts and coalescing keys.
    ///   - wallMs: server time, for receipts.
    public init(_ event: InboundEvent, policy: EventPolicy, userID: String, wallMs: Int64) throws(RelayError) {
        let payload = event.payload
        if !event.attachments.isEmpty && policy.kind != .custom {
            throw RelayError(.invalidPayload, "binary attachments are carried by custom events only")
        }
        func broadcast(_ validated: JSONValue) throws(RelayError) -> Broadcast {
            let room = try EventValidator.room(in: validated)
            return Broadcast(policy: policy, room: room, payload: validated, coalescingKey: policy.coalescingKey(room: room, user: userID))
        }
        switch policy.kind {
        case .roomJoin: self = .join(room: try EventValidator.room(in: payload))
        case .roomLeave: self = .leave(room: try EventValidator.room(in: payload))
        case .presenceList: self = .presence(room: try EventValidator.room(in: payload))
        case .typingStart: self = .typing(room: try EventValidator.room(in: payload), isTyping: true)
        case .typingStop: self = .typing(room: try EventValidator.room(in: payload), isTyping: false)
        case .reaction: self = .reaction(try broadcast(EventValidator.reaction(payload)))
        case .shareLive:
            let (validated, duration) = try EventValidator.shareLive(payload)
            self = .shareLive(try broadcast(validated), durationSec: duration)
        case .locationUpdate: self = .locationUpdate(try broadcast(EventValidator.locationUpdate(payload)))
        case .locationStop: self = .locationStop(try broadcast(EventValidator.roomOnly(payload)))
        case .custom:
            var b = try broadcast(EventValidator.custom(payload, attachmentCount: event.attachments.count))
            b.attachments = event.attachments
            self = .custom(b)
        case .delivered: self = try Self.receipts(payload, userID: userID, kind: .delivered, ts: wallMs)
        case .read: self = try Self.receipts(payload, userID: userID, kind: .read, ts: wallMs)
        case .receiptSync:
            var since: Int64 = 0
            if let value = payload["since"], value != .null {
                guard let s = value.intValue, s >= 0 else { throw RelayError(.invalidPayload, "since must be a non-negative integer cursor") }
                since = s
            }
            var limit = Self.defaultSyncPage
            if let value = payload["limit"], value != .null {
                guard let l = value.intValue, l >= 1, l <= Int64(Self.maxSyncPage) else {
                    throw RelayError(.invalidPayload, "limit must be an integer in 1...\(Self.maxSyncPage)")
                }
                limit = Int(l)
            }
            self = .receiptSync(since: since, limit: limit)
        case .authRefresh:
            guard let token = payload["token"]?.stringValue, !token.isEmpty, token.utf8.count <= 8192 else {
                throw RelayError(.invalidPayload, "auth:refresh needs {token}")
            }
            self = .authRefresh(token: token)
        case .roomSync:
            let room = try EventValidator.room(in: payload)
            guard let text = payload["offset"]?.stringValue, let offset = WireOffset(text) else {
                throw RelayError(.invalidPayload, "offset must be a room offset \"<ms>-<seq>:<tag>\"")
            }
            guard offset.tag == StreamKey.room(room).tag else { throw RelayError(.invalidPayload, "offset is not one of \(room)'s") }
            var limit = Self.defaultRoomSyncPage
            if let value = payload["limit"], value != .null {
                guard let l = value.intValue, l >= 1, l <= Int64(Self.maxRoomSyncPage) else {
                    throw RelayError(.invalidPayload, "limit must be an integer in 1...\(Self.maxRoomSyncPage)")
                }
                limit = Int(l)
            }
            self = .roomSync(room: room, offset: offset, limit: limit)
        case .serverOnly, .presence:
            throw RelayError(.eventNotAllowed, "clients may not emit \(policy.name)")
        }
    }
}
