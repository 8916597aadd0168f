/// What every `EngineSession` enforces. No value here has a default: the relay fills it from its
/// settings table (`RelayConfiguration.sessionConfiguration`), where each default is declared
/// once; tests state the values they test.
public struct SessionConfiguration: Sendable, Equatable {
    /// Engine.IO heartbeat: a ping every `intervalMs` after the previous pong; the client must
    /// answer within `timeoutMs`.
    public struct Heartbeat: Sendable, Equatable {
        public var intervalMs: Int64
        public var timeoutMs: Int64

        public init(intervalMs: Int64, timeoutMs: Int64) {
            self.intervalMs = intervalMs
            self.timeoutMs = timeoutMs
        }
    }

    /// When the token's lifetime is told and enforced.
    public struct TokenTiming: Sendable, Equatable {
        /// How long after `exp` a socket may stay (the token verifier's leeway).
        public var leewayMs: Int64
        /// How long before `exp` (+ leeway) the socket is told `auth:expiring`; 0: never.
        public var expiryNoticeMs: Int64

        public init(leewayMs: Int64, expiryNoticeMs: Int64) {
            self.leewayMs = leewayMs
            self.expiryNoticeMs = expiryNoticeMs
        }
    }

    /// The rates a session may spend.
    public struct Budgets: Sendable, Equatable {
        /// Client events overall.
        public var events: EventRateLimiter.Budget
        /// Client events per rate class (a class not named has no budget of its own).
        public var perClass: [RateClass: EventRateLimiter.Budget]
        /// Error replies a connection may cause before it is closed with 1008.
        public var errorReplies: EventRateLimiter.Budget
        /// Packets and event bytes per second, on every transport, before and after CONNECT.
        public var inbound: InboundBudget.Limits

        public init(
            events: EventRateLimiter.Budget, perClass: [RateClass: EventRateLimiter.Budget],
            errorReplies: EventRateLimiter.Budget, inbound: InboundBudget.Limits
        ) {
            self.events = events
            self.perClass = perClass
            self.errorReplies = errorReplies
            self.inbound = inbound
        }
    }

    public var heartbeat: Heartbeat
    /// Time to send CONNECT after the session opened (and after a `41`).
    public var connectTimeoutMs: Int64
    /// Time for a probing WebSocket to complete the upgrade (`2probe` … `5`).
    public var upgradeTimeoutMs: Int64
    /// Largest inbound message (announced in the open packet).
    public var maxPayload: Int
    /// Largest inbound message or frame before CONNECT succeeded, and again after a `41`.
    public var maxConnectPayload: Int
    /// Largest client event (encoded bytes).
    public var maxEventBytes: Int
    public var customEventsEnabled: Bool
    /// Binary attachments one packet may announce.
    public var maxAttachments: Int
    public var budgets: Budgets
    public var tokens: TokenTiming
    /// Rooms a CONNECT may name (`rooms` in its auth).
    public var maxRoomsInConnect: Int
    /// Refused CONNECTs a session may have: each refusal leaves it open for another `40`, this
    /// one closes it (4003). 1: the first refusal closes.
    public var maxConnectRefusals: Int

    public init(
        heartbeat: Heartbeat, connectTimeoutMs: Int64, upgradeTimeoutMs: Int64,
        maxPayload: Int, maxConnectPayload: Int, maxEventBytes: Int, customEventsEnabled: Bool,
        maxAttachments: Int, budgets: Budgets, tokens: TokenTiming, maxRoomsInConnect: Int, maxConnectRefusals: Int
    ) {
        self.heartbeat = heartbeat
        self.connectTimeoutMs = connectTimeoutMs
        self.upgradeTimeoutMs = upgradeTimeoutMs
        self.maxPayload = maxPayload
        self.maxConnectPayload = maxConnectPayload
        self.maxEventBytes = maxEventBytes
        self.customEventsEnabled = customEventsEnabled
        self.maxAttachments = maxAttachments
        self.budgets = budgets
        self.tokens = tokens
        self.maxRoomsInConnect = maxRoomsInConnect
        self.maxConnectRefusals = maxConnectRefusals
    }
}

/// One `SessionConfiguration` for every session of a server: each session holds a pointer to
/// it instead of its own copy (a hundred-odd bytes less per socket).
public final class SharedSessionConfiguration: Sendable {
    public let value: SessionConfiguration
    /// The event budgets every session's `EventRateLimiter` points to.
    public let eventBudgets: EventRateLimiter.Budgets

    public init(_ value: SessionConfiguration) {
        self.value = value
        self.eventBudgets = EventRateLimiter.Budgets(overall: value.budgets.events, perClass: value.budgets.perClass)
    }
}
