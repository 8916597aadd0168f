/// Why a connection ended: the label of `relay_disconnects_total{reason}` and of the disconnect
/// log line, and whether its session is kept for connection state recovery.
///
/// Told by the close code the session ended with (`init(closeCode:)`), or `transportClosed`
/// when the transport went away without one.
public enum ConnectionEnd: Sendable, Equatable, CaseIterable {
    /// The client ended it: its Engine.IO close (`1`), a close frame with 1000, or Socket.IO
    /// DISCONNECT (`41`).
    case clientClosed
    /// No pong within `pingTimeout` (4000).
    case pingTimeout
    /// No CONNECT within the connect timeout (4001).
    case connectTimeout
    /// The CONNECT was refused (4003).
    case authenticationFailed
    /// The outbound queue (or the deliveries held during CONNECT) passed its bound (4008).
    case slowConsumer
    /// An operator or the backend ended it (4004).
    case kicked
    /// The token expired without an `auth:refresh` (4005).
    case tokenExpired
    /// The server is shutting down, or the peer is going away (1001).
    case shutdown
    /// A packet or frame broke the protocol (1002, 1003, 1007, 1009).
    case protocolError
    /// A limit was passed: too many packets, too many refused events (1008).
    case policyViolation
    /// The client came back on another connection with this session's pid (4009).
    case replaced
    /// The transport went away without a close code of the session's (or with one not listed).
    case transportClosed

    public init(closeCode: UInt16) {
        switch closeCode {
        case CloseCode.normal: self = .clientClosed
        case CloseCode.goingAway: self = .shutdown
        case CloseCode.pingTimeout: self = .pingTimeout
        case CloseCode.connectTimeout: self = .connectTimeout
        case CloseCode.authenticationFailed: self = .authenticationFailed
        case CloseCode.kicked: self = .kicked
        case CloseCode.tokenExpired: self = .tokenExpired
        case CloseCode.policyViolation: self = .policyViolation
        case CloseCode.slowConsumer: self = .slowConsumer
        case CloseCode.replaced: self = .replaced
        case CloseCode.protocolError, CloseCode.unsupportedData, CloseCode.invalidPayloadData, CloseCode.messageTooBig: self = .protocolError
        default: self = .transportClosed
        }
    }

    /// The `reason` label: dashboards and tests read these, so they never change.
    public var metricLabel: String {
        switch self {
        case .clientClosed: return "client"
        case .pingTimeout: return "ping_timeout"
        case .connectTimeout: return "connect_timeout"
        case .authenticationFailed: return "auth_failed"
        case .slowConsumer: return "slow_consumer"
        case .kicked: return "kicked"
        case .tokenExpired: return "token_expired"
        case .shutdown: return "shutdown"
        case .protocolError: return "protocol_error"
        case .policyViolation: return "policy_violation"
        case .replaced: return "replaced"
        case .transportClosed: return "closed"
        }
    }

    /// Whether the user stays present for the presence grace (`presence-grace-ms`): the
    /// connection dropped or was ended for a reason the client comes back from at once (the
    /// network, a missed pong, a shutdown or handover, an expired token, a slow read). A kick
    /// or a broken rule ends presence at once, and so does a `41` (the caller knows it).
    public var holdsPresence: Bool {
        switch self {
        case .clientClosed, .transportClosed, .pingTimeout, .shutdown, .replaced, .tokenExpired, .slowConsumer: return true
        case .connectTimeout, .authenticationFailed, .kicked, .protocolError, .policyViolation: return false
        }
    }

    /// Whether the session of a socket that takes offsets is kept for the recovery window: the
    /// transport dropped, the server went away, or a reconnect took it over. A kick, an expired
    /// token, a slow reader or a broken rule end it for good. (A client that sent `41` is not
    /// kept either: the session knows it left, this reason alone cannot tell.)
    public var keepsSessionForRecovery: Bool {
        switch self {
        case .clientClosed, .transportClosed, .pingTimeout, .shutdown, .replaced: return true
        case .connectTimeout, .authenticationFailed, .slowConsumer, .kicked, .tokenExpired, .protocolError, .policyViolation: return false
        }
    }
}
