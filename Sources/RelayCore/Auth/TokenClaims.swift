/// The claims Relay reads from a client token's payload, validated.
///
/// - `sub` (required): a string that is a valid `Identifier` of at most `maxSubjectBytes` bytes.
/// - `exp` (required), `nbf`, `iat` (optional): JSON numbers (RFC 7519 NumericDate), integer or
///   not. They are converted to whole seconds — `exp` and `iat` rounded down, `nbf` rounded up,
///   so a fraction never extends a token's life — and must lie within ±`maxTimeMagnitude`
///   (2^53 s, about 285 million years, the range where every integer is exact in a `Double`).
///   A value outside it, such as `1e300` or 2^63, is refused, not clamped: no real issuer sends
///   one, and clamping would turn `exp: 1e300` into a token that never expires. The conversion
///   cannot trap.
/// - `rooms` (optional): an array of at most `maxRooms` strings, each a valid `Identifier` of at
///   most `maxRoomPatternBytes` bytes (a room name, or a prefix pattern ending in `*`).
///
/// `null` counts as absent. Other claims are ignored (RFC 7519 §4). A claim of the wrong JSON
/// type, or a payload that is not a JSON object (duplicate keys included), is `token_malformed`;
/// a missing required claim or a value out of its bounds is `token_invalid_claims`.
public struct TokenClaims: Sendable, Equatable {
    /// The longest `sub`, in UTF-8 bytes.
    public static let maxSubjectBytes = 256
    /// The most entries `rooms` may have.
    public static let maxRooms = 1000
    /// The longest entry of `rooms`, in UTF-8 bytes.
    public static let maxRoomPatternBytes = 256
    /// The largest magnitude of a time claim, in seconds: 2^53.
    public static let maxTimeMagnitude: Int64 = 1 << 53

    /// `sub`: the user id.
    public var subject: String
    /// `exp`, in seconds since 1970.
    public var expiresAt: Int64
    /// `nbf`, in seconds since 1970.
    public var notBefore: Int64?
    /// `iat`, in seconds since 1970.
    public var issuedAt: Int64?
    /// `rooms`: room names and prefix patterns for `RoomAuthorization`.
    public var rooms: [String]?

    /// Claims as given; no validation.
    public init(subject: String, expiresAt: Int64, notBefore: Int64? = nil, issuedAt: Int64? = nil, rooms: [String]? = nil) {
        self.subject = subject
        self.expiresAt = expiresAt
        self.notBefore = notBefore
        self.issuedAt = issuedAt
        self.rooms = rooms
    }

    /// Parses a decoded payload (JSON bytes) and validates it.
    public static func parse(_ bytes: [UInt8]) throws(RelayError) -> TokenClaims {
        guard let json = try? JSONParser.parse(bytes) else { throw RelayError(.tokenMalformed, "token payload is not valid JSON") }
        return try TokenClaims(json: json)
    }

    /// Reads and validates the claims of a parsed payload.
    public init(json: JSONValue) throws(RelayError) {
        guard json.isObject else { throw RelayError(.tokenMalformed, "token payload is not a JSON object") }
        // Types first (a wrong type is malformed), then presence and bounds (invalid claims).
        var subject: String?
        switch json["sub"] {
        case nil, .null?: subject = nil
        case .string(let s)?: subject = s
        default: throw RelayError(.tokenMalformed, "sub must be a string")
        }
        let exp = try Self.time(json, "exp", rounding: .down)
        let nbf = try Self.time(json, "nbf", rounding: .up)
        let iat = try Self.time(json, "iat", rounding: .down)
        var rooms: [String]?
        switch json["rooms"] {
        case nil, .null?: rooms = nil
        case .array(let items)?:
            var names: [String] = []
            names.reserveCapacity(min(items.count, Self.maxRooms))
            for item in items {
                guard case .string(let name) = item else { throw RelayError(.tokenMalformed, "rooms must be an array of strings") }
                names.append(name)
            }
            rooms = names
        default: throw RelayError(.tokenMalformed, "rooms must be an array of strings")
        }

        guard let subject, !subject.isEmpty else { throw RelayError(.tokenInvalidClaims, "sub is required") }
        guard Identifier.isValid(subject, maxBytes: Self.maxSubjectBytes) else {
            throw RelayError(.tokenInvalidClaims, "sub must be at most \(Self.maxSubjectBytes) bytes, in Unicode NFC, without control characters")
        }
        guard let exp else { throw RelayError(.tokenInvalidClaims, "exp is required") }
        guard let expSeconds = exp.seconds else { throw RelayError(.tokenInvalidClaims, "exp is out of range") }
        guard nbf?.seconds != nil || nbf == nil else { throw RelayError(.tokenInvalidClaims, "nbf is out of range") }
        guard iat?.seconds != nil || iat == nil else { throw RelayError(.tokenInvalidClaims, "iat is out of range") }
        if let rooms {
            guard rooms.count <= Self.maxRooms else { throw RelayError(.tokenInvalidClaims, "rooms has more than \(Self.maxRooms) entries") }
            for room in rooms where !Identifier.isValid(room, maxBytes: Self.maxRoomPatternBytes) {
                throw RelayError(
                    .tokenInvalidClaims, "rooms entries must be 1-\(Self.maxRoomPatternBytes) bytes, in Unicode NFC, without control characters")
            }
        }
        self.init(subject: subject, expiresAt: expSeconds, notBefore: nbf?.seconds, issuedAt: iat?.seconds, rooms: rooms)
    }

    /// True when the token has expired at `now`, allowing `leeway` seconds: `exp + leeway <= now`
    /// (saturating, so no overflow whatever the inputs).
    public func isExpired(now: Int64, leeway: Int64) -> Bool {
        expiresAt.saturatingAdding(leeway) <= now
    }

    /// True when the token is not valid yet at `now`, allowing `leeway` seconds:
    /// `nbf - leeway > now` (saturating).
    public func isNotYetValid(now: Int64, leeway: Int64) -> Bool {
        guard let notBefore else { return false }
        return notBefore.saturatingAdding(Self.saturatingNegate(leeway)) > now
    }

    /// A time claim that has the right type; `seconds` is `nil` when it is out of range.
    private struct TimeClaim {
        var seconds: Int64?
    }

    private static func time(_ json: JSONValue, _ key: String, rounding: FloatingPointRoundingRule) throws(RelayError) -> TimeClaim? {
        switch json[key] {
        case nil, .null?:
            return nil
        case .int(let i)?:
            return TimeClaim(seconds: (-maxTimeMagnitude...maxTimeMagnitude).contains(i) ? i : nil)
        case .double(let d)?:
            return TimeClaim(seconds: seconds(d, rounding: rounding))
        default:
            throw RelayError(.tokenMalformed, "\(key) must be a number")
        }
    }

    /// Whole seconds of a finite `Double` within ±`maxTimeMagnitude`, else `nil`. Never traps:
    /// NaN and infinities fail `isFinite`, and `Int64(exactly:)` returns `nil` rather than trap.
    static func seconds(_ d: Double, rounding: FloatingPointRoundingRule) -> Int64? {
        guard d.isFinite else { return nil }
        let limit = Double(maxTimeMagnitude)  // 2^53, exact
        let whole = d.rounded(rounding)
        guard whole >= -limit, whole <= limit else { return nil }
        return Int64(exactly: whole)
    }

    private static func saturatingNegate(_ a: Int64) -> Int64 { a == .min ? .max : -a }
}
