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
