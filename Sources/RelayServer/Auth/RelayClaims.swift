import JWTKit
import RelayCore

/// The claims of a client token, as jwt-kit encodes them when Relay signs one (`TokenIssuer`,
/// tests, the load generator).
///
/// Verification does not decode this type: `TokenVerifier` reads the claims with RelayCore's
/// `TokenClaims`, which enforces the bounds (NFC `sub` and `rooms`, time claims within ±2^53 s)
/// without trapping. `verify(using:)` checks nothing.
public struct RelayClaims: JWTPayload, Equatable {
    public var sub: SubjectClaim?
    public var exp: ExpirationClaim?
    public var nbf: NotBeforeClaim?
    public var iat: IssuedAtClaim?
    public var rooms: [String]?

    /// Claims for a token about to be signed.
    public init(sub: String, exp: ExpirationClaim, nbf: NotBeforeClaim? = nil, iat: IssuedAtClaim? = nil, rooms: [String]?) {
        self.sub = SubjectClaim(value: sub)
        self.exp = exp
        self.nbf = nbf
        self.iat = iat
        self.rooms = rooms
    }

    /// Checks nothing: time claims are checked by `TokenVerifier` against its injected clock.
    public func verify(using algorithm: some JWTAlgorithm) async throws {}
}
