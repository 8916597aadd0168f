import RelayCore

/// What a connection may send: event sizes and rates, inbound budgets, error replies, rooms,
/// and the typing windows.
public struct EventSettings: Sendable, Equatable {
    public var customEventsEnabled = false
    /// Largest event payload (encoded JSON bytes) a client may send; larger ones get `payload_too_large`.
    public var maxEventBytes = 0
    public var eventsPerSecond = EventRateLimiter.Budget(perSecond: 0, burst: 0)
    public var eventsPerSecondByClass: [RateClass: EventRateLimiter.Budget] = [:]
    /// Packets and event bytes per connection, on every transport, before and after CONNECT
    /// (`InboundBudget`).
    public var inbound = InboundBudget.Limits(packets: .init(perSecond: 0, burst: 0), bytes: .init(perSecond: 0, burst: 0), eventBytes: .init(perSecond: 0, burst: 0))
    /// Error replies (error acks and `error` events) a connection may cause; past the budget
    /// the relay stops answering and closes the socket with 1008.
    public var errorReplies = EventRateLimiter.Budget(perSecond: 0, burst: 0)
    public var maxRoomsPerConnection = 0
    /// Room joins per user across all of the user's sockets (`user-joins-per-second`).
    public var userJoins = EventRateLimiter.Budget(perSecond: 0, burst: 0)
    public var maxMembersPerRoom = 0
    public var typingWindowMs: Int64 = 0
    public var typingExpiryMs: Int64 = 0
    /// How long a dropped connection's user stays present (rooms, online) for it to come back
    /// without a leave and a join anyone sees; 0: it leaves at once.
    public var presenceGraceMs = 0

    public init() {}
}
