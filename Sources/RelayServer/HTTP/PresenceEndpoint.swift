import NIOCore
import NIOHTTP1
import RelayBackends
import RelayCore

/// The backend's presence queries (API key), answered the same from every node: the cluster's
/// user directory in Redis, or this node's view with `"degraded":true` while Redis is down.
///
/// - `GET /api/v1/users/{user}/presence` →
///   `{"user","online","devices","rooms":[…],"lastSeen":ms|null}`
/// - `POST /api/v1/presence` `{"users":[…]}` (1…1000, duplicates once) →
///   `{"users":{"bob":{"online","devices","lastSeen"},…}}`
struct PresenceEndpoint {
    let presence: PresenceAnnouncer
    static let maxUsers = 1000
    static let prefix = "/api/v1/users/"
    static let suffix = "/presence"

    /// The raw `{user}` segment when `path` is `/api/v1/users/{user}/presence`.
    static func userSegment(of path: String) -> Substring? {
        guard path.hasPrefix(prefix), path.hasSuffix(suffix), path.utf8.count > prefix.utf8.count + suffix.utf8.count else { return nil }
        let segment = path.dropFirst(prefix.count).dropLast(suffix.count)
        return segment.contains("/") ? nil : segment
    }

    func user(segment: Substring, on loop: any EventLoop) -> EventLoopFuture<HTTPResponse> {
        guard let user = Self.percentDecode(segment), Identifier.isValid(user, maxBytes: EmitEndpoint.maxUserBytes) else {
            return loop.makeSucceededFuture(
                .error(.badRequest, code: "invalid_payload", message: "the user must be a user id (1-\(EmitEndpoint.maxUserBytes) bytes, Unicode NFC, percent-encoded)"))
        }
        return presence.userPresence([user], withRooms: true, on: loop).map { answer in
            let p = answer.value.first ?? UserPresence(user: user, devices: 0)
            var fields: [(String, JSONValue)] = [
                ("user", .string(user)), ("online", .bool(p.online)), ("devices", .int(Int64(p.devices))),
                ("rooms", .array(p.rooms.map { .string($0) })), ("lastSeen", p.lastSeen.map { JSONValue.int($0) } ?? .null),
            ]
            if answer.degraded { fields.append(("degraded", true)) }
            return .json(.ok, .object(fields))
        }
    }

    func batch(_ body: [UInt8], on loop: any EventLoop) -> EventLoopFuture<HTTPResponse> {
        let json: JSONValue
        do {
            json = try JSONParser.parse(body)
        } catch {
            return loop.makeSucceededFuture(.error(.badRequest, code: "invalid_json", message: "body is not valid JSON"))
        }
        let max = EmitEndpoint.maxUserBytes
        guard case .array(let items)? = json["users"], !items.isEmpty, items.count <= Self.maxUsers else {
            return loop.makeSucceededFuture(.error(.badRequest, code: "invalid_payload", message: "users must be an array of 1-\(Self.maxUsers) user ids"))
        }
        var seen = Set<String>()
        var users: [String] = []
        for (i, item) in items.enumerated() {
            guard let user = item.stringValue, Identifier.isValid(user, maxBytes: max) else {
                return loop.makeSucceededFuture(.error(.badRequest, code: "invalid_payload", message: "users[\(i)] must be a user id (1-\(max) bytes, Unicode NFC)"))
            }
            if seen.insert(user).inserted { users.append(user) }
        }
        return presence.userPresence(users, withRooms: false, on: loop).map { answer in
            let entries = answer.value.map { p -> (String, JSONValue) in
                (p.user, .object([("online", .bool(p.online)), ("devices", .int(Int64(p.devices))), ("lastSeen", p.lastSeen.map { JSONValue.int($0) } ?? .null)]))
            }
            var fields: [(String, JSONValue)] = [("users", .object(entries))]
            if answer.degraded { fields.append(("degraded", true)) }
            return .json(.ok, .object(fields))
        }
    }

    /// Percent-decodes a path segment (`+` stays `+`); `nil` for a malformed escape or bytes
    /// that are not UTF-8.
    static func percentDecode(_ segment: Substring) -> String? {
        var out: [UInt8] = []
        var bytes = segment.utf8.makeIterator()
        while let b = bytes.next() {
            guard b == UInt8(ascii: "%") else {
                out.append(b)
                continue
            }
            guard let hi = bytes.next().flatMap(hex), let lo = bytes.next().flatMap(hex) else { return nil }
            out.append(hi << 4 | lo)
        }
        return String(validating: out, as: UTF8.self)
    }

    private static func hex(_ b: UInt8) -> UInt8? {
        switch b {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): return b - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): return b - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): return b - UInt8(ascii: "A") + 10
        default: return nil
        }
    }
}
