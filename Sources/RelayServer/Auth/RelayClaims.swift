import JWTKit
import RelayCore

/// The claims Relay reads from a client token.
///
/// `exp` and `sub` are optional here only so that their absence gets its own error code;
/// `TokenVerifier` requires both. Time claims are checked by `TokenVerifier` against its
/// injected clock, so `verify(using:)` checks nothing.
public struct RelayClaims: JWTPayload, Equatable {
    public var sub: SubjectClaim?
    public var exp: ExpirationClaim?
    public var nbf: NotBeforeClaim?
    public var iat: IssuedAtClaim?
    public var rooms: [String]?

    public init(sub: String, exp: ExpirationClaim, nbf: NotBeforeClaim? = nil, iat: IssuedAtClaim? = nil, rooms: [String]?) {
        self.sub = SubjectClaim(value: sub)
        self.exp = exp
        self.nbf = nbf
        self.iat = iat
        self.rooms = rooms
    }

    public func verify(using algorithm: some JWTAlgorithm) async throws {}
}

/// The identity a verified token establishes.
public struct AuthenticatedUser: Sendable, Equatable {
    public var userID: String
    public var rooms: RoomAuthorization
    public var expiresAt: Int64
}

