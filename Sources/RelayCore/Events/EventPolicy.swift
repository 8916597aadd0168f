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

    public var name: String
    public var handling: Handling
    public var coalescing: Coalescing
    /// Rate-limit class; events in one class share a per-connection budget.
    public var rateClass: RateClass

    public init(name: String, handling: Handling, coalescing: Coalescing = .none, rateClass: RateClass) {
        self.name = name
        self.handling = handling
        self.coalescing = coalescing
        self.rateClass = rateClass
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
            EventPolicy(name: "room:join", handling: .request, rateClass: .control),
            EventPolicy(name: "room:leave", handling: .request, rateClass: .control),
            EventPolicy(name: "presence:list", handling: .request, rateClass: .control),
            EventPolicy(name: "receipt:sync", handling: .request, rateClass: .control),
            EventPolicy(name: "typing:start", handling: .typing, coalescing: .perRoomUser, rateClass: .typing),
            EventPolicy(name: "typing:stop", handling: .typing, coalescing: .perRoomUser, rateClass: .typing),
            EventPolicy(name: "message:reaction", handling: .roomBroadcast, rateClass: .reaction),
            EventPolicy(name: "location:share-live", handling: .roomBroadcast, rateClass: .location),
            EventPolicy(name: "location:update", handling: .roomBroadcast, coalescing: .perRoomSender, rateClass: .location),
            EventPolicy(name: "location:stop", handling: .roomBroadcast, rateClass: .location),
            EventPolicy(name: "message:delivered", handling: .receipt, rateClass: .receipt),
            EventPolicy(name: "message:read", handling: .receipt, rateClass: .receipt),
            EventPolicy(name: "presence:join", handling: .serverOnly, coalescing: .perRoomUser, rateClass: .control),
            EventPolicy(name: "presence:leave", handling: .serverOnly, coalescing: .perRoomUser, rateClass: .control),
            EventPolicy(name: "notification:new", handling: .serverOnly, rateClass: .control),
            EventPolicy(name: "message:new", handling: .serverOnly, rateClass: .control),
        ]
        return Dictionary(uniqueKeysWithValues: entries.map { ($0.name, $0) })
    }()

    /// The policy for a custom `entity:action-word` event.
    public static func custom(_ name: String) -> EventPolicy {
        EventPolicy(name: name, handling: .roomBroadcast, rateClass: .custom)
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
