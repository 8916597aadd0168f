import Foundation
import JWTKit
import RelayCore

/// Signs HS256 client tokens: `relay token`, dev mode's sample token, tests, the load generator.
public enum TokenIssuer {
    public enum SecretError: Error, CustomStringConvertible, Equatable {
        case tooShort(Int)
        public var description: String {
            switch self {
            case .tooShort(let n): return "the JWT secret must be at least 32 bytes (got \(n))"
            }
        }
    }

    /// jwt-kit traps on HMAC keys under 32 bytes, so every secret is checked here first.
    public static func validateSecret(_ secret: String) throws(SecretError) {
        guard secret.utf8.count >= 32 else { throw .tooShort(secret.utf8.count) }
    }

    public static func sign(
        secret: String, subject: String, rooms: [String]?, ttlSeconds: Int64,
        now: Date = Date()
    ) async throws -> String {
        try validateSecret(secret)
        // Whole seconds: some JWT libraries reject fractional NumericDates.
        let now = Date(timeIntervalSince1970: now.timeIntervalSince1970.rounded(.down))
        let keys = JWTKeyCollection()
        await keys.add(hmac: HMACKey(from: secret), digestAlgorithm: .sha256)
        let claims = RelayClaims(
            sub: subject, exp: ExpirationClaim(value: now.addingTimeInterval(TimeInterval(ttlSeconds))),
            iat: IssuedAtClaim(value: now), rooms: rooms)
        return try await keys.sign(claims)
    }

    /// A random URL-safe secret of `bytes` random bytes (hex).
    public static func randomSecret(bytes: Int = 32) -> String {
        var rng = SystemRandomNumberGenerator()
        return (0..<bytes).map { _ in String(format: "%02x", UInt8.random(in: 0...255, using: &rng)) }.joined()
    }
}
