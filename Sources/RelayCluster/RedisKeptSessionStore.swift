import NIOCore
import RelayBackends
import RelayCore
import RelayRedis

/// Sessions in Redis: `relay:session:<pid>` with the record as JSON, expiring with the window,
/// taken with GETDEL (atomically: two nodes never both recover one session).
public final class RedisKeptSessionStore: KeptSessionStore {
    package let redis: RedisClient
    /// Records kept per user: the oldest past it are deleted (`relay:sessions-of:<user>` lists
    /// a user's records in the order they were kept).
    package let maxPerUser: Int

    public init(redis: RedisClient, maxPerUser: Int = 64) {
        self.redis = redis
        self.maxPerUser = max(1, maxPerUser)
    }

    package static func key(_ pid: String) -> String { "relay:session:\(pid)" }
    package static func userKey(_ user: String) -> String { "relay:sessions-of:\(user)" }

    /// Keeps the record and lists it under its user; past `maxPerUser` the user's oldest go.
    package static let putScript = """
        redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
        redis.call('LREM', KEYS[2], 0, KEYS[1])
        redis.call('RPUSH', KEYS[2], KEYS[1])
        redis.call('PEXPIRE', KEYS[2], ARGV[2])
        local max = tonumber(ARGV[3])
        while redis.call('LLEN', KEYS[2]) > max do
            local old = redis.call('LPOP', KEYS[2])
            redis.call('DEL', old)
        end
        return 1
        """

    public func put(_ record: KeptSession, windowMs: Int64) {
        guard redis.isUp else { return }
        _ = redis.send([
            "EVAL", Self.putScript, "2", Self.key(record.pid), Self.userKey(record.userID),
            JSONWriter.string(record.json), String(max(1, windowMs)), String(maxPerUser),
        ])
    }

    /// One hash, `relay:revoked`: user → cutoff; entries past their time are dropped when read.
    package static let revokedKey = "relay:revoked"

    public func saveRevocation(user: String, cutoff: Int64, ttlSeconds: Int64) {
        _ = redis.send(["HSET", Self.revokedKey, user, "\(cutoff):\(cutoff + ttlSeconds)"])
    }

    public func revocations(on loop: any EventLoop) -> EventLoopFuture<[(String, Int64)]> {
        redis.send(["HGETALL", Self.revokedKey]).map { reply -> [(String, Int64)] in
            var out: [(String, Int64)] = []
            var pairs: [(RESPValue, RESPValue)] = []
            if case .map(let m) = reply { pairs = m } else if let flat = reply.elements {
                var i = 0
                while i + 1 < flat.count { pairs.append((flat[i], flat[i + 1])); i += 2 }
            }
            for (k, v) in pairs {
                guard let user = k.string, let text = v.string else { continue }
                let parts = text.split(separator: ":")
                guard parts.count == 2, let cutoff = Int64(parts[0]) else { continue }
                out.append((user, cutoff))
            }
            return out
        }.recover { _ in [] }.hop(to: loop)
    }

    /// Deletes the record only if it is the user's, atomically: two nodes never both recover
    /// one session, and another user's token leaves it in place.
    package static let takeScript = """
        local v = redis.call('GET', KEYS[1])
        if not v then return {0} end
        local ok, record = pcall(cjson.decode, v)
        if not ok or record['u'] ~= ARGV[1] then return {2} end
        redis.call('DEL', KEYS[1])
        redis.call('LREM', KEYS[2], 0, KEYS[1])
        return {1, v}
        """

    public func take(pid: String, user: String, on loop: any EventLoop) -> EventLoopFuture<KeptSessionTake> {
        redis.send(["EVAL", Self.takeScript, "2", Self.key(pid), Self.userKey(user), user]).map { reply -> KeptSessionTake in
            guard let items = reply.elements, let status = items.first?.int else { return .notFound }
            switch status {
            case 1:
                guard items.count == 2, let text = items[1].string, let json = try? JSONParser.parse(text), let record = KeptSession(json: json) else {
                    return .notFound
                }
                return .taken(record)
            case 2: return .otherUser
            default: return .notFound
            }
        }.hop(to: loop)
    }
}
