/// Every error code Relay puts in an `error` event, an error ack or a CONNECT_ERROR.
/// `docs/PROTOCOL.md` lists them all; keep the two in step.
public enum RelayErrorCode: String, Sendable, CaseIterable, Error {
    // Protocol
    case invalidPacket = "invalid_packet"
    case binaryNotSupported = "binary_not_supported"
    case invalidNamespace = "invalid_namespace"
    case notConnected = "not_connected"
    // Events
    case invalidEventName = "invalid_event_name"
    case invalidPayload = "invalid_payload"
    case eventNotAllowed = "event_not_allowed"
    case customEventsDisabled = "custom_events_disabled"
    case payloadTooLarge = "payload_too_large"
    case rateLimited = "rate_limited"
    // Rooms
    case roomNotAuthorized = "room_not_authorized"
    case notInRoom = "not_in_room"
    case tooManyRooms = "too_many_rooms"
    case roomFull = "room_full"
    // Live location
    case noLiveShare = "no_live_share"
    // Receipts
    case storeUnavailable = "store_unavailable"
    // History
    case historyUnavailable = "history_unavailable"
    // Authentication (CONNECT_ERROR `data.code`)
    case tokenMissing = "token_missing"
    case tokenMalformed = "token_malformed"
    case tokenAlgNone = "token_alg_none"
    case tokenAlgMismatch = "token_alg_mismatch"
    case tokenBadSignature = "token_bad_signature"
    case tokenExpired = "token_expired"
    case tokenNotYetValid = "token_not_yet_valid"
    case tokenInvalidClaims = "token_invalid_claims"
    case authRateLimited = "auth_rate_limited"
    case tokenSubjectMismatch = "token_subject_mismatch"
    case tokenRevoked = "token_revoked"
    case tooManyConnections = "too_many_connections"
    case internalError = "internal_error"

    /// A short human-readable message for the code.
    public var message: String {
        switch self {
        case .invalidPacket: return "malformed packet"
        case .binaryNotSupported: return "binary packets are not supported"
        case .invalidNamespace: return "only the main namespace \"/\" is served"
        case .notConnected: return "send CONNECT (40) first"
        case .invalidEventName: return "event names must match entity:action-word (lowercase, hyphens)"
        case .invalidPayload: return "event payload is missing or has invalid fields"
        case .eventNotAllowed: return "clients may not emit this event"
        case .customEventsDisabled: return "custom events are disabled on this relay"
        case .payloadTooLarge: return "event payload is too large"
        case .rateLimited: return "too many events; slow down"
        case .roomNotAuthorized: return "your token does not allow this room"
        case .notInRoom: return "join the room first"
        case .tooManyRooms: return "too many rooms on this connection"
        case .roomFull: return "room has reached its member limit"
        case .noLiveShare: return "start a live location share first"
        case .storeUnavailable: return "receipt store unavailable; retry"
        case .tokenMissing: return "authentication token missing"
        case .tokenMalformed: return "authentication token is malformed"
        case .tokenAlgNone: return "unsigned tokens (alg none) are refused"
        case .tokenAlgMismatch: return "token algorithm does not match the configured one"
        case .tokenBadSignature: return "token signature is invalid"
        case .tokenExpired: return "token has expired"
        case .tokenNotYetValid: return "token is not valid yet"
        case .tokenInvalidClaims: return "token claims are invalid (sub and exp are required)"
        case .authRateLimited: return "too many failed authentications; retry later"
        case .tokenSubjectMismatch: return "the new token is for another user"
        case .tokenRevoked: return "the token was revoked by the backend; get a new one"
        case .tooManyConnections: return "connection limit reached"
        case .internalError: return "internal error"
        case .historyUnavailable: return "the room's history no longer reaches back to this offset; reload from your backend"
        }
    }
}

/// An error with a code and an optional more specific message.
public struct RelayError: Error, Equatable, Sendable {
    public var code: RelayErrorCode
    public var message: String

    public init(_ code: RelayErrorCode, _ message: String? = nil) {
        self.code = code
        self.message = message ?? code.message
    }

    /// `{"code","message"}` as sent in `error` events and error acks.
    public var json: JSONValue {
        .object([("code", .string(code.rawValue)), ("message", .string(message))])
    }

    /// `{"ok":false,"error":{...}}`, the error ack shape.
    public var ackPayload: JSONValue {
        .object([("ok", .bool(false)), ("error", json)])
    }

    /// `{"message","data":{"code"}}`, the CONNECT_ERROR (`44`) shape the Socket.IO clients read.
    public var connectErrorPayload: JSONValue {
        .object([("message", .string(message)), ("data", .object([("code", .string(code.rawValue))]))])
    }
}
