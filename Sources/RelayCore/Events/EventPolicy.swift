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
        case serverOnly
    }

    /// The key under which a queued event is replaced by a newer one (backpressure).
    public struct CoalescingKey: Hashable, Sendable {
        public var event: String
        public var room: String
        public var user: String
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

    /// Durable events are stored and acked after commit; they are never coalesced.
    public var isDurable: Bool { handling == .receipt }

    /// Recoverable events get an offset in their room's or user's history stream, so a client
    /// that missed them across a reconnect gets them back. Typing and location updates are not:
    /// the next one supersedes them.
    public var isRecoverable: Bool {
        switch handling {
        case .request, .typing: return false
        case .roomBroadcast, .receipt, .serverOnly: return kind != .locationUpdate
        }
    }

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
public enum EventPolicyTable {
    public static let known: [String: EventPolicy] = {
        let entries: [EventPolicy] = [
            EventPolicy(name: "room:join", kind: .roomJoin, handling: .request, rateClass: .control),
            EventPolicy(name: "room:leave", kind: .roomLeave, handling: .request, rateClass: .control),
            EventPolicy(name: "presence:list", kind: .presenceList, handling: .request, rateClass: .control),
            EventPolicy(name: "receipt:sync", kind: .receiptSync, handling: .request, rateClass: .control),
            EventPolicy(name: "room:sync", kind: .roomSync, handling: .request, rateClass: .control),
            EventPolicy(name: "auth:refresh", kind: .authRefresh, handling: .request, rateClass: .control),
            EventPolicy(name: "auth:expiring", kind: .serverOnly, handling: .serverOnly, rateClass: .control),
            EventPolicy(name: "auth:expired", kind: .serverOnly, handling: .serverOnly, rateClass: .control),
            EventPolicy(name: "typing:start", kind: .typingStart, handling: .typing, coalescing: .perRoomUser, rateClass: .typing),
            EventPolicy(name: "typing:stop", kind: .typingStop, handling: .typing, coalescing: .perRoomUser, rateClass: .typing),
            EventPolicy(name: "message:reaction", kind: .reaction, handling: .roomBroadcast, rateClass: .reaction),
            EventPolicy(name: "location:share-live", kind: .shareLive, handling: .roomBroadcast, rateClass: .location),
            EventPolicy(name: "location:update", kind: .locationUpdate, handling: .roomBroadcast, coalescing: .perRoomSender, rateClass: .location),
            EventPolicy(name: "location:stop", kind: .locationStop, handling: .roomBroadcast, rateClass: .location),
            EventPolicy(name: "message:delivered", kind: .delivered, handling: .receipt, rateClass: .receipt),
            EventPolicy(name: "message:read", kind: .read, handling: .receipt, rateClass: .receipt),
            EventPolicy(name: "presence:join", kind: .serverOnly, handling: .serverOnly, coalescing: .perRoomUser, rateClass: .control),
            EventPolicy(name: "presence:leave", kind: .serverOnly, handling: .serverOnly, coalescing: .perRoomUser, rateClass: .control),
            EventPolicy(name: "notification:new", kind: .serverOnly, handling: .serverOnly, rateClass: .control),
            EventPolicy(name: "message:new", kind: .serverOnly, handling: .serverOnly, rateClass: .control),
        ]
        return Dictionary(uniqueKeysWithValues: entries.map { ($0.name, $0) })
    }()

    /// The policy for a custom `entity:action-word` event.
    public static func custom(_ name: String) -> EventPolicy {
        EventPolicy(name: name, kind: .custom, handling: .roomBroadcast, rateClass: .custom)
    }

    /// Whether an event Relay sends with this name is recoverable: as the table declares, and
    /// custom or backend events are.
    public static func isRecoverable(_ name: String) -> Bool {
        known[name]?.isRecoverable ?? (name != "error")
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
