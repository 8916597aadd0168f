import RelayCore

/// Who may connect and call the APIs: the client tokens' algorithm and leeway, the backend's,
/// admin's and metrics' bearer keys, and how long tokens and revocations are watched.
public struct AuthSettings: Sendable {
    /// How client tokens are signed (declared with the token verifier).
    public var jwt: TokenAlgorithm
    /// Accepted clock skew for `exp`/`nbf`, seconds.
    public var jwtLeewaySeconds: Int64 = 0
    public var apiKey: String
    public var adminKey: String
    /// Bearer key required by `GET /metrics` when set (else it is open, for an internal network).
    public var metricsKey: String?
    /// How long before a token's `exp` its socket is told `auth:expiring` (0: never).
    public var tokenExpiryNoticeMs: Int64 = 0
    /// How long a backend revocation (`POST /api/v1/users/{user}/disconnect` with `revoke`) is
    /// kept: at least the longest token lifetime.
    public var revocationTTLSeconds: Int64 = 0
    /// Failed authentications allowed per client IP (burst, then per second).
    public var authFailuresPerIP = EventRateLimiter.Budget(perSecond: 1, burst: 10)

    public init(jwt: TokenAlgorithm, apiKey: String, adminKey: String) {
        self.jwt = jwt
        self.apiKey = apiKey
        self.adminKey = adminKey
    }
}
