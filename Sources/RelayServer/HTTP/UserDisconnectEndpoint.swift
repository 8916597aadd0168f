import NIOHTTP1
import RelayCore

/// `POST /api/v1/users/{user}/disconnect`: the backend ends every session of a user on every
/// node (logout, ban, password change).
///
/// Body (optional): `{"revoke": true}` also refuses the user's tokens issued (`iat`) before this
/// second, cluster-wide, for `--revocation-ttl-s` (`token_revoked`). Answers
/// `{"user","disconnected":N,"revoked":bool}`, N counting this node's sockets (the other nodes
/// close theirs when the message reaches them, within a Redis round trip).
struct UserDisconnectEndpoint {
    let revocations: Revocations

    /// The user of `/api/v1/users/{user}/disconnect`, percent-decoded; `nil` for other paths.
    static func user(inPath path: String) -> String? {
        let prefix = "/api/v1/users/", suffix = "/disconnect"
        guard path.hasPrefix(prefix), path.hasSuffix(suffix), path.utf8.count > prefix.utf8.count + suffix.utf8.count else { return nil }
        let encoded = path.dropFirst(prefix.count).dropLast(suffix.count)
        guard !encoded.contains("/") else { return nil }
        return QueryString.decode(encoded)
    }

    func handle(user: String, body: [UInt8]) -> HTTPResponse {
        guard Identifier.isValid(user, maxBytes: 256) else {
            return .error(.badRequest, code: "invalid_payload", message: "the user id must be 1–256 bytes of NFC without control characters")
        }
        var revoke = false
        if !body.isEmpty {
            guard let json = try? JSONParser.parse(body), json.isObject else {
                return .error(.badRequest, code: "invalid_json", message: "body is not a JSON object")
            }
            switch json["revoke"] {
            case nil, .null?: break
            case .bool(let value)?: revoke = value
            default: return .error(.badRequest, code: "invalid_payload", message: "revoke must be a boolean")
            }
        }
        let closed = revocations.disconnect(user: user, revoke: revoke)
        return .json(.ok, .object([("user", .string(user)), ("disconnected", .int(Int64(closed))), ("revoked", .bool(revoke))]))
    }
}
