/// WebSocket close codes Relay sends (RFC 6455 §7.4 plus Relay's 4xxx codes).
/// `docs/PROTOCOL.md` lists them; keep the two in step.
public enum CloseCode {
    public static let normal: UInt16 = 1000
    public static let goingAway: UInt16 = 1001
    public static let protocolError: UInt16 = 1002
    public static let unsupportedData: UInt16 = 1003
    public static let invalidPayloadData: UInt16 = 1007
    public static let policyViolation: UInt16 = 1008
    public static let messageTooBig: UInt16 = 1009
    public static let internalError: UInt16 = 1011
    /// The client did not answer a ping within `pingTimeout`.
    public static let pingTimeout: UInt16 = 4000
    /// The client did not send CONNECT within the connect timeout.
    public static let connectTimeout: UInt16 = 4001
    /// Authentication failed (after a CONNECT_ERROR packet).
    public static let authenticationFailed: UInt16 = 4003
    /// An operator kicked the connection.
    public static let kicked: UInt16 = 4004
    /// The token expired (beyond the leeway) without an `auth:refresh`.
    public static let tokenExpired: UInt16 = 4005
    /// The outbound queue passed its hard limit: the client reads too slowly.
    public static let slowConsumer: UInt16 = 4008
    /// The client came back on another connection with this session's `pid` (recovery) while
    /// this one still looked alive: the old connection is closed and its session handed over.
    public static let replaced: UInt16 = 4009

    /// Whether a session that ended with `code` still answers the long-polling client's next
    /// `GET` with what it buffered and Engine.IO `1`, when no `GET` was waiting: the ends the
    /// client must hear about (a CONNECT refusal, a kick, an expired token, a shutdown). After
    /// a ping timeout, a broken rule or the client's own close the session is simply gone:
    /// the next `GET` gets 400, as the Engine.IO protocol says.
    public static func isOwedToPoller(_ code: UInt16) -> Bool {
        switch code {
        case goingAway, internalError, connectTimeout, authenticationFailed, kicked, tokenExpired, slowConsumer, replaced: return true
        default: return false
        }
    }

    /// Whether `code` ends a session for input that broke the protocol or a limit: the polling
    /// request that carried it is answered 400.
    public static func isRequestFault(_ code: UInt16) -> Bool {
        switch code {
        case protocolError, unsupportedData, invalidPayloadData, policyViolation, messageTooBig: return true
        default: return false
        }
    }

    /// Whether a peer may send `code` in a close frame (RFC 6455 §7.4).
    public static func isValidReceived(_ code: UInt16) -> Bool {
        switch code {
        case 1000...1003, 1007...1011, 3000...4999: return true
        default: return false
        }
    }
}
