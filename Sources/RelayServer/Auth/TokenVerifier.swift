import Foundation
import JWTKit
import RelayCore

/// Verifies client tokens and classifies every failure with its own error code.
///
/// The token is taken apart by RelayCore's `CompactJWT` (a pure parser, fuzzed by
/// `Fuzz/FuzzJWT.swift`): header, `alg` (pinned to the configured algorithm here, before any
/// key is used; `none` refused), `crit` (refused), and then the claims (`TokenClaims`: `sub`,
/// `exp`, `nbf`, `iat`, `rooms`, with bounds and trap-free time conversion). jwt-kit is used
/// only to check the signature: it decodes the payload as `SignatureOnly`, which reads nothing.
/// `exp`/`nbf` are checked here against an injected wall clock, with saturating arithmetic.
///
/// Order of checks, so each failure has one code: structure and header (`token_missing`,
/// `token_malformed`, `token_alg_none`), `alg` (`token_alg_mismatch`), signature
/// (`token_bad_signature`), claims (`token_malformed` for a wrong type, `token_invalid_claims`
/// for a missing or out-of-range value), then time (`token_expired`, `token_not_yet_valid`).
public struct TokenVerifier: Sendable {
    public let algorithm: TokenAlgorithm
    public let leewaySeconds: Int64
    private let keys: JWTKeyCollection
    private let now: @Sendable () -> Int64

    /// - Parameter now: wall clock in seconds since 1970 (injectable for tests).
    public init(
        algorithm: TokenAlgorithm, leewaySeconds: Int64 = 30,
        now: @escaping @Sendable () -> Int64 = { Int64(Date().timeIntervalSince1970) }  // the local clock, not network data
    ) async throws {
        self.algorithm = algorithm
        self.leewaySeconds = leewaySeconds
        self.now = now
        let keys = JWTKeyCollection()
        switch algorithm {
        case .hs256(let secret):
            try TokenIssuer.validateSecret(secret)
            await keys.add(hmac: HMACKey(from: secret), digestAlgorithm: .sha256)
        case .es256(let pem):
            await keys.add(ecdsa: try ES256PublicKey(pem: pem))
        }
        self.keys = keys
    }

    /// Verifies a token; the error is a `RelayError` with a `token_*` code.
    public func verify(_ token: String) async -> Result<AuthenticatedUser, RelayError> {
        let jwt: CompactJWT
        do {
            jwt = try CompactJWT.parse(token)
        } catch {
            return .failure(error)
        }
        guard jwt.algorithm == algorithm.name else {
            return .failure(RelayError(.tokenAlgMismatch, "token alg \(jwt.algorithm.prefix(16)) is not the configured \(algorithm.name)"))
        }
        do {
            _ = try await keys.verify(token, as: SignatureOnly.self)
        } catch let error as JWTError where error.errorType == .signatureVerificationFailed {
            return .failure(RelayError(.tokenBadSignature))
        } catch let error as JWTError where error.errorType == .malformedToken {
            return .failure(RelayError(.tokenMalformed))
        } catch {
            return .failure(RelayError(.tokenInvalidClaims))
        }
        let claims: TokenClaims
        do {
            claims = try jwt.claims()
        } catch {
            return .failure(error)
        }
        let nowSeconds = now()
        if claims.isExpired(now: nowSeconds, leeway: leewaySeconds) { return .failure(RelayError(.tokenExpired)) }
        if claims.isNotYetValid(now: nowSeconds, leeway: leewaySeconds) { return .failure(RelayError(.tokenNotYetValid)) }
        return .success(
            AuthenticatedUser(userID: claims.subject, rooms: RoomAuthorization(patterns: claims.rooms ?? []), expiresAt: claims.expiresAt, issuedAt: claims.issuedAt))
    }
}

/// The payload type jwt-kit decodes while checking the signature: it reads nothing, because the
/// claims come from `CompactJWT.claims()`, and its `verify(using:)` checks nothing.
private struct SignatureOnly: JWTPayload {
    init(from decoder: any Decoder) throws {}
    func encode(to encoder: any Encoder) throws {}
    func verify(using algorithm: some JWTAlgorithm) async throws {}
}
