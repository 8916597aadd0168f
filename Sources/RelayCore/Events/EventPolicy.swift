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
