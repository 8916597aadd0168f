/// The limits and timings an `EngineSession` enforces.
public struct SessionConfiguration: Sendable, Equatable {
    /// Engine.IO heartbeat: a ping every `pingIntervalMs` after the previous pong; the client
    /// must answer within `pingTimeoutMs`.
    public var pingIntervalMs: Int64 = 25_000
    public var pingTimeoutMs: Int64 = 20_000
    /// Time to send CONNECT after the session opened.
    public var connectTimeoutMs: Int64 = 10_000
    /// Time for a probing WebSocket to complete the upgrade (`2probe` … `5`).
    public var upgradeTimeoutMs: Int64 = 10_000
    /// Largest inbound message (announced in the open packet).
    public var maxPayload = 1_000_000
    /// Largest inbound message or frame before CONNECT succeeded, and again after a `41`.
    public var maxConnectPayload = 16_384
    /// Largest client event (encoded bytes).
    public var maxEventBytes = 64 * 1024
    public var customEventsEnabled = true
    /// Binary attachments one packet may announce.
    public var maxAttachments = SocketPacket.defaultMaxAttachments
    public var eventsPerSecond = EventRateLimiter.Budget(perSecond: 50, burst: 100)
    public var eventsPerClass: [RateClass: EventRateLimiter.Budget] = [:]
    /// Error replies a connection may cause before it is closed with 1008.
    public var errorReplies = EventRateLimiter.Budget(perSecond: 5, burst: 20)
    /// Packets and event bytes per second, on every transport, before and after CONNECT.
    public var inbound = InboundBudget.Limits()

    /// How long after `exp` a socket may stay (the token verifier's leeway).
    public var tokenLeewayMs: Int64 = 30_000
    /// How long before `exp` (+ leeway) the socket is told `auth:expiring`; 0: never.
    public var expiryNoticeMs: Int64 = 60_000
    /// Rooms a CONNECT may name (`rooms` in its auth).
    public var maxRoomsInConnect = 100

    public init() {}
}

/// One `SessionConfiguration` for every session of a server: each session holds a pointer to
/// it instead of its own copy (a hundred-odd bytes less per socket).
public final class SharedSessionConfiguration: Sendable {
    public let value: SessionConfiguration
    /// The event budgets every session's `EventRateLimiter` points to.
    public let eventBudgets: EventRateLimiter.Budgets

    public init(_ value: SessionConfiguration) {
        self.value = value
        self.eventBudgets = EventRateLimiter.Budgets(overall: value.eventsPerSecond, perClass: value.eventsPerClass)
    }
}
