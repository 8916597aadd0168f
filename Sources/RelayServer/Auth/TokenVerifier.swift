import Foundation
import JWTKit
import RelayCore

/// Verifies client tokens with jwt-kit and classifies every failure with its own error code.
///
/// The header's `alg` is pinned to the configured algorithm before jwt-kit sees the token
/// (jwt-kit would otherwise accept whatever its default key can check), and `exp`/`nbf` are
/// checked here against an injected wall clock.
public struct TokenVerifier: Sendable {
    public let algorithm: RelayConfiguration.JWTAlgorithm
    public let leewaySeconds: Int64
    private let keys: JWTKeyCollection
    private let now: @Sendable () -> Int64

    /// - Parameter now: wall clock in seconds since 1970 (injectable for tests).
    public init(
        algorithm: RelayConfiguration.JWTAlgorithm, leewaySeconds: Int64 = 30,
        now: @escaping @Sendable () -> Int64 = { Int64(Date().timeIntervalSince1970) }
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
        guard !token.isEmpty else { return .failure(RelayError(.tokenMissing)) }
        guard token.utf8.count <= 8192 else { return .failure(RelayError(.tokenMalformed, "token too long")) }
        let parts = token.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3, let headerBytes = Self.base64URLDecode(parts[0]),
            let header = try? JSONParser.parse(headerBytes), case .string(let alg)? = header["alg"]
        else {
            return .failure(RelayError(.tokenMalformed))
        }
        if alg.lowercased() == "none" { return .failure(RelayError(.tokenAlgNone)) }
        guard alg == algorithm.name else {
            return .failure(RelayError(.tokenAlgMismatch, "token alg \(alg.prefix(16)) is not the configured \(algorithm.name)"))
        }
        let claims: RelayClaims
        do {
            claims = try await keys.verify(token, as: RelayClaims.self)
        } catch let error as JWTError where error.errorType == .signatureVerificationFailed {
            return .failure(RelayError(.tokenBadSignature))
        } catch let error as JWTError where error.errorType == .malformedToken {
            return .failure(RelayError(.tokenMalformed))
        } catch {
            return .failure(RelayError(.tokenInvalidClaims))
        }
        guard let sub = claims.sub?.value, !sub.isEmpty, sub.utf8.count <= 256 else {
            return .failure(RelayError(.tokenInvalidClaims, "sub is required"))
        }
        guard let exp = claims.exp else { return .failure(RelayError(.tokenInvalidClaims, "exp is required")) }
        let nowSeconds = now()
        let expSeconds = Int64(exp.value.timeIntervalSince1970)
        guard expSeconds + leewaySeconds > nowSeconds else { return .failure(RelayError(.tokenExpired)) }
        if let nbf = claims.nbf, Int64(nbf.value.timeIntervalSince1970) - leewaySeconds > nowSeconds {
            return .failure(RelayError(.tokenNotYetValid))
        }
        return .success(AuthenticatedUser(userID: sub, rooms: RoomAuthorization(patterns: claims.rooms ?? []), expiresAt: expSeconds))
    }

    static func base64URLDecode(_ s: Substring) -> [UInt8]? {
        var b64 = s.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        while b64.count % 4 != 0 { b64.append("=") }
        return Data(base64Encoded: b64).map { [UInt8]($0) }
    }
}
