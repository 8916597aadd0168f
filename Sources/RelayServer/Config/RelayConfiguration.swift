import NIOCore
import RelayCore

/// Everything a relay process is told at startup. Defaults are the documented production
/// defaults (see README "Configuration").
///
/// A property that a setting writes starts at zero (or empty) here: `init` writes each
/// setting's declared default (`ConfigurationLoader.settings`), so every default is written
/// once. Properties that no setting writes keep the defaults written here.
public struct RelayConfiguration: Sendable {
    /// How client tokens are signed (declared with the token verifier).
    public typealias JWTAlgorithm = TokenAlgorithm

    public var host = ""
    public var port = 0
    public var jwt: JWTAlgorithm
    /// Accepted clock skew for `exp`/`nbf`, seconds.
    public var jwtLeewaySeconds: Int64 = 0
    public var apiKey: String
    public var adminKey: String
    public var databasePath = ""
    /// Receipts older than this are deleted in the background; `nil` keeps them.
    public var receiptsRetentionDays: Int?
    /// Most receipts per transaction (group commit).
    public var receiptsMaxBatch = 1024
    /// How many event loops (threads) serve sockets; defaults to the core count.
    public var eventLoopThreads = NIOCore.System.coreCount

    // Engine.IO
    public var pingIntervalMs = 0
    public var pingTimeoutMs = 0
    /// Largest inbound message (bytes); larger ones close the socket with 1009.
    public var maxPayload = 0
    /// Largest inbound message or frame (bytes) before CONNECT succeeded: an unauthenticated
    /// socket cannot make the relay buffer `maxPayload` (1009 when over).
    public var maxConnectPayload = 0
    /// Time for a client to send CONNECT (`40`) after the socket opens.
    public var connectTimeoutMs = 0
    /// Time for a TCP client to complete its HTTP request (upgrade or API call).
    public var handshakeTimeoutMs = 0

    /// Negotiate permessage-deflate with clients that offer it.
    public var deflateEnabled = false
    /// Messages smaller than this go uncompressed even to deflate clients.
    public var deflateThresholdBytes = 0
    /// PEM certificate chain and private key files; both set means TLS (wss://, https://).
    public var tlsCertificatePath: String?
    public var tlsKeyPath: String?
    /// A WebSocket echo endpoint on the same stack, for conformance tests (off when `nil`).
    public var echoPath: String?

    // Events and limits
    public var customEventsEnabled = false
    /// Largest event payload (encoded JSON bytes) a client may send; larger ones get `payload_too_large`.
    public var maxEventBytes = 0
    public var eventsPerSecond = EventRateLimiter.Budget(perSecond: 0, burst: 0)
    public var eventsPerSecondByClass: [RateClass: EventRateLimiter.Budget] = [:]
    /// Packets and event bytes per connection, on every transport, before and after CONNECT
    /// (`InboundBudget`).
    public var inbound = InboundBudget.Limits()
    /// Error replies (error acks and `error` events) a connection may cause; past the budget
    /// the relay stops answering and closes the socket with 1008.
    public var errorReplies = EventRateLimiter.Budget(perSecond: 0, burst: 0)
    /// Receipts (`message:delivered`/`message:read`) one user may write per second across all
    /// of their connections; over it they get `rate_limited`.
    public var receiptsPerUser = EventRateLimiter.Budget(perSecond: 0, burst: 0)
    /// Receipts of one connection waiting for their commit; more get `rate_limited`.
    public var maxPendingReceiptsPerConnection = 0
    public var maxRoomsPerConnection = 0
    /// Recoverable events kept per room and per user (history), for recovery and `room:sync`.
    public var historyLimits = HistoryLimits()
    /// How long a dropped session can be recovered (at most the history's age limit).
    public var recoveryWindowMs: Int64 = 0
    /// A reconnect with the `pid` of a connection that still looks alive takes it over (closes
    /// it, 4009, and recovers its session) once that connection is this old, ms. Younger, the
    /// reconnect is a new session: two sockets racing with one pid never recover it both in turn.
    public var recoveryTakeoverAfterMs: Int64 = 0
    /// How long before a token's `exp` its socket is told `auth:expiring` (0: never).
    public var tokenExpiryNoticeMs: Int64 = 0
    /// How long a backend revocation (`POST /api/v1/users/{user}/disconnect` with `revoke`) is
    /// kept: at least the longest token lifetime.
    public var revocationTTLSeconds: Int64 = 0
    /// Every socket gets offsets and a `pid`, not only those that opt in.
    public var offsetsForEverySocket = false
    public var maxMembersPerRoom = 0
    public var maxConnections = 0
    public var maxConnectionsPerUser = 0
    public var maxConnectionsPerIP = 0
    /// Failed authentications allowed per client IP (burst, then per second).
    public var authFailuresPerIP = EventRateLimiter.Budget(perSecond: 1, burst: 10)
    /// Origins allowed to open a WebSocket. Empty: only clients that send no `Origin` (native
    /// apps). `*` allows any origin.
    public var allowedOrigins: [String] = []
    /// Bearer key required by `GET /metrics` when set (else it is open, for an internal network).
    public var metricsKey: String?
    /// Largest HTTP API request body.
    public var maxHTTPBodyBytes = 256 * 1024

    // The client's address behind load balancers
    /// Every connection must start with a PROXY protocol header (v1 or v2) sent by one of
    /// `trustedProxies`; the client it declares is the connection's address. Connections
    /// without one, or from any other peer, are closed.
    public var proxyProtocol = false
    /// The load balancers whose word about the client is believed: their PROXY header, and
    /// their `X-Forwarded-For` (right-most untrusted entry). Empty: nobody's.
    public var trustedProxies = TrustedProxies()

    // Cluster
    /// `redis://host:port`: join the other nodes on this Redis (nil: a single node).
    public var redisURL: String?
    /// This node's id among the nodes (default: random at start).
    public var nodeID: String?
    /// Heartbeat period; a node silent for three periods is presumed dead and leaves presence.
    public var clusterHeartbeatMs: Int64 = 0

    /// Signed webhooks to the backend (off without a URL; docs/PROTOCOL.md §13).
    public var webhooks = WebhookSettings()

    // Memory
    /// How often the heap may be trimmed after connection churn (`HeapTrimmer`); 0: never.
    public var heapTrimIntervalMs = 0
    /// Sessions that must have ended since the last trim for the next one.
    public var heapTrimAfterSessions = 0

    // Shutdown
    /// Sockets told to go per second during a graceful shutdown, so they do not all reconnect at once.
    public var drainRatePerSecond = 0
    /// Upper bound of a graceful shutdown; sockets still open then are closed at once.
    public var shutdownTimeoutMs = 0

    // Typing and live location
    public var typingWindowMs: Int64 = 0
    public var typingExpiryMs: Int64 = 0

    // Outbound queue (per connection)
    /// Over this many queued bytes, coalescible events replace their older queued twin.
    public var outboundSoftLimitBytes = 256 * 1024
    /// Over this many queued bytes, the connection is closed (4008).
    public var outboundHardLimitBytes = 1024 * 1024
    public var outboundMaxQueuedMessages = 4096

    /// Which browser origins may open a socket (the relay's own host only as `https` when it
    /// serves TLS itself).
    public var originPolicy: OriginPolicy {
        OriginPolicy(allowed: allowedOrigins, secure: tlsCertificatePath != nil && tlsKeyPath != nil)
    }

    /// Makes the limits hold together: the event-bytes burst lets one event of `maxEventBytes`
    /// through, the inbound byte burst two messages of `maxPayload`, and every connection's
    /// outbound budget holds two of the largest events, so no event a sender may send ends a
    /// recipient that reads. (The defaults go further: one sender's whole event-bytes burst,
    /// 512 KiB, is half the 1 MiB outbound limit.)
    public mutating func applyEventByteBounds() {
        inbound.eventBytes.burst = max(inbound.eventBytes.burst, Double(maxEventBytes))
        inbound.bytes.burst = max(inbound.bytes.burst, 2 * Double(maxPayload))
        let (twoEvents, overflow) = maxEventBytes.multipliedReportingOverflow(by: 2)
        outboundHardLimitBytes = max(outboundHardLimitBytes, overflow ? .max : twoEvents)
        outboundSoftLimitBytes = min(outboundSoftLimitBytes, outboundHardLimitBytes)
    }

    public init(jwt: JWTAlgorithm, apiKey: String, adminKey: String) {
        self.jwt = jwt
        self.apiKey = apiKey
        self.adminKey = adminKey
        for setting in ConfigurationLoader.settings {
            guard let value = setting.defaultValue else { continue }
            let problems = setting.apply(value, &self)
            assert(problems.isEmpty, "the default of \(setting.name) is invalid: \(problems)")
        }
    }
}

