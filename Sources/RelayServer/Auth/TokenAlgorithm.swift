/// How client tokens are signed: the only algorithm a verifier accepts (pinned, never read from
/// the token's header).
public enum TokenAlgorithm: Sendable, Equatable {
    /// HMAC-SHA256 with a shared secret (at least 32 bytes).
    case hs256(secret: String)
    /// ECDSA P-256 with the backend's public key (PEM).
    case es256(publicKeyPEM: String)

    public var name: String {
        switch self {
        case .hs256: return "HS256"
        case .es256: return "ES256"
        }
    }
}
