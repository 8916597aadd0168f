/// How Relay treats one event name: who may send it, where it goes, whether it may be
/// coalesced under backpressure, and whether it is durable.
public struct EventPolicy: Sendable, Equatable {
    /// What Relay does with the event when a client sends it.
    public enum Handling: Sendable, Equatable {
        /// Answered by Relay itself (join, leave, presence, sync).
        case request
        /// Through the typing debouncer, then to the room minus the typing user.
        case typing
        /// Validated, stamped, then fanned out to the room minus the sending socket.
        case roomBroadcast
        /// A durable receipt: stored, acked after commit, then forwarded.
        case receipt
        /// Only the backend or Relay itself may emit it.
        case serverOnly
    }

    /// Under backpressure a queued event with the same key is replaced by the newer one.
    public enum Coalescing: Sendable, Equatable {
        case none
        /// Keyed by room and user (typing, presence).
        case perRoomUser
        /// Keyed by room and sender: only the newest location per sender is kept.
        case perRoomSender
    }

    /// Which typed `ClientEvent` a client-sent event becomes.
    public enum Kind: Sendable, Equatable {
        case roomJoin, roomLeave, presenceList, receiptSync, roomSync, authRefresh
        case typingStart, typingStop
        case reaction, shareLive, locationUpdate, locationStop
        case delivered, read
        case custom
        /// Relay's own `presence:join`/`presence:leave` (server-only, never kept in history).
        case presence
        case serverOnly
    }

    public var name: String
    public var kind: Kind
    public var handling: Handling
    public var coalescing: Coalescing
    /// Rate-limit class; events in one class share a per-connection budget.
    public var rateClass: RateClass

    public init(name: String, kind: Kind, handling: Handling, coalescing: Coalescing = .none, rateClass: RateClass) {
        self.name = name
        self.kind = kind
        self.handling = handling
        self.coalescing = coalescing
        self.rateClass = rateClass
    }

    /// The event's label in metrics: its name, or `custom` (bounded: custom names are not).
    public var metricLabel: String { kind == .custom ? "custom" : name }

    /// Durable events are stored and acked after commit; they are never coalesced.
    public var isDurable: Bool { handling == .receipt }

    /// Recoverable events get an offset in their room's or user's history stream, so a client
    /// that missed them across a reconnect gets them back. Typing and location updates are not:
    /// the next one supersedes them. Nor is presence (`presence:join`/`leave`): it says what is
    /// true now (`presence:list` answers it), and kept in history it could push the room's chat
    /// events out of the bounded history of every room its user is in.
    public var isRecoverable: Bool {
        switch handling {
        case .request, .typing: return false
        case .roomBroadcast, .receipt, .serverOnly: return kind != .locationUpdate && !isPresence
        }
    }

    /// `presence:join` or `presence:leave`.
    public var isPresence: Bool { kind == .presence }

    /// The coalescing key of this event in `room` from `user`, as the table declares it:
    /// per (room, user) events share their entity's key (`typing:start` and `typing:stop` replace
    /// each other), per (room, sender) events are keyed by their full name.
    public func coalescingKey(room: String, user: String) -> CoalescingKey? {
        switch coalescing {
        case .none: return nil
        case .perRoomUser: return CoalescingKey(event: EventName.entity(of: name), room: room, user: user)
        case .perRoomSender: return CoalescingKey(event: name, room: room, user: user)
        }
    }
}

/// Per-kind rate-limit budgets (the overall per-connection budget applies on top).
public enum RateClass: String, Sendable, CaseIterable {
    case control, typing, reaction, location, receipt, custom
}

/// The table of every event Relay knows. Unknown names that fit the grammar are custom events.
///
/// The only place event names are written: client events are looked up here by name once, as
/// they arrive; events Relay makes itself name their entry (`ServerEvent`, `ReceiptKind`).
public enum EventPolicyTable {
    public static let roomJoin = EventPolicy(name: "room:join", kind: .roomJoin, handling: .request, rateClass: .control)
    public static let roomLeave = EventPolicy(name: "room:leave", kind: .roomLeave, handling: .request, rateClass: .control)
    public static let presenceList = EventPolicy(name: "presence:list", kind: .presenceList, handling: .request, rateClass: .control)
    public static let receiptSync = EventPolicy(name: "receipt:sync", kind: .receiptSync, handling: .request, rateClass: .control)
    public static let roomSync = EventPolicy(name: "room:sync", kind: .roomSync, handling: .request, rateClass: .control)
    public static let authRefresh = EventPolicy(name: "auth:refresh", kind: .authRefresh, handling: .request, rateClass: .control)
    public static let authExpiring = EventPolicy(name: "auth:expiring", kind: .serverOnly, handling: .serverOnly, rateClass: .control)
    public static let authExpired = EventPolicy(name: "auth:expired", kind: .serverOnly, handling: .serverOnly, rateClass: .control)
    public static let typingStart = EventPolicy(name: "typing:start", kind: .typingStart, handling: .typing, coalescing: .perRoomUser, rateClass: .typing)
    public static let typingStop = EventPolicy(name: "typing:stop", kind: .typingStop, handling: .typing, coalescing: .perRoomUser, rateClass: .typing)
    public static let reaction = EventPolicy(name: "message:reaction", kind: .reaction, handling: .roomBroadcast, rateClass: .reaction)
    public static let shareLive = EventPolicy(name: "location:share-live", kind: .shareLive, handling: .roomBroadcast, rateClass: .location)
    public static let locationUpdate = EventPolicy(
        name: "location:update", kind: .locationUpdate, handling: .roomBroadcast, coalescing: .perRoomSender, rateClass: .location)
    public static let locationStop = EventPolicy(name: "location:stop", kind: .locationStop, handling: .roomBroadcast, rateClass: .location)
    public static let delivered = EventPolicy(name: "message:delivered", kind: .delivered, handling: .receipt, rateClass: .receipt)
    public static let read = EventPolicy(name: "message:read", kind: .read, handling: .receipt, rateClass: .receipt)
    public static let presenceJoin = EventPolicy(name: "presence:join", kind: .presence, handling: .serverOnly, coalescing: .perRoomUser, rateClass: .control)
    public static let presenceLeave = EventPolicy(name: "presence:leave", kind: .presence, handling: .serverOnly, coalescing: .perRoomUser, rateClass: .control)
    public static let notificationNew = EventPolicy(name: "notification:new", kind: .serverOnly, handling: .serverOnly, rateClass: .control)
    public static let messageNew = EventPolicy(name: "message:new", kind: .serverOnly, handling: .serverOnly, rateClass: .control)

    /// Every known event.
    public static let all: [EventPolicy] = [
        roomJoin, roomLeave, presenceList, receiptSync, roomSync, authRefresh, authExpiring, authExpired, typingStart, typingStop,
        reaction, shareLive, locationUpdate, locationStop, delivered, read, presenceJoin, presenceLeave, notificationNew, messageNew,
    ]

    public static let known: [String: EventPolicy] = Dictionary(uniqueKeysWithValues: all.map { ($0.name, $0) })

    /// The name of the Socket.IO error event, reserved: neither clients nor the backend send it.
    public static let errorEventName = "error"

    /// The policy for a custom `entity:action-word` event.
    public static func custom(_ name: String) -> EventPolicy {
        EventPolicy(name: name, kind: .custom, handling: .roomBroadcast, rateClass: .custom)
    }

    /// The policy of an event the backend emits (HTTP API): a known event's, or a custom one's.
    public static func backend(_ name: String) -> EventPolicy {
        known[name] ?? custom(name)
    }

    /// The bounded metric label of an event name as it arrived: known names as they are,
    /// custom ones as `custom`, names outside the grammar as `invalid`.
    public static func metricLabel(for name: String) -> String {
        known[name] != nil || name == errorEventName ? name : (EventName.isValid(name) ? "custom" : "invalid")
    }

    /// Looks up the policy for a client-sent event name.
    ///
    /// - Throws: `invalid_event_name` outside the grammar (and for the reserved `error`),
    ///   `event_not_allowed` for server-only events, `custom_events_disabled` for custom events
    ///   when they are turned off.
    public static func policy(forClientEvent name: String, customEventsEnabled: Bool) throws(RelayError) -> EventPolicy {
        guard EventName.isValid(name) else { throw RelayError(.invalidEventName, "invalid event name: \(name.prefix(EventName.maxLength))") }
        if let policy = known[name] {
            if policy.handling == .serverOnly { throw RelayError(.eventNotAllowed, "clients may not emit \(name)") }
            return policy
        }
        guard customEventsEnabled else { throw RelayError(.customEventsDisabled) }
        return custom(name)
    }
}
