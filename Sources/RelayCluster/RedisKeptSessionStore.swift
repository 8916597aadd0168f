import NIOCore
import RelayBackends
import RelayCore
import RelayRedis

/// Sessions in Redis: `relay:session:{<pid>}` with the record as JSON, expiring with the
/// window, taken by a script that checks the user and deletes it (atomically: two nodes never
/// both recover one session; another user's token leaves it in place).
///
/// Redis Cluster: a record is in its pid's slot, a user's list (`relay:sessions-of:{<user>}`)
/// in the user's; each script touches one key. Keeping a record is SET, then the list script
/// (which answers the evicted records), then a DEL per evicted record; taking one is the take
/// script, then LREM from the list: a list may briefly name a record that is gone (harmless:
/// deleting it again does nothing), never miss one that is kept.
public final class RedisKeptSessionStore: KeptSessionStore {
    package let redis: RedisClient
    /// Records kept per user: the oldest past it are deleted (`relay:sessions-of:{<user>}`
    /// lists a user's records in the order they were kept).
    package let maxPerUser: Int

    public init(redis: RedisClient, maxPerUser: Int = 64) {
        self.redis = redis
        self.maxPerUser = max(1, maxPerUser)
    }

    package static func key(_ pid: String) -> String { "relay:session:" + ClusterKeys.tag(pid) }
    package static func userKey(_ user: String) -> String { "relay:sessions-of:" + ClusterKeys.tag(user) }

    /// Lists the record ARGV[1] last under its user (KEYS[1]), expiring with ARGV[2] ms; past
    /// ARGV[3] records the oldest leave the list. Returns the record keys that left (the
    /// caller deletes them: each is in its own slot).
    package static let listScript = """
        redis.call('LREM', KEYS[1], 0, ARGV[1])
        redis.call('RPUSH', KEYS[1], ARGV[1])
        redis.call('PEXPIRE', KEYS[1], ARGV[2])
        local max = tonumber(ARGV[3])
        local evicted = {}
        while redis.call('LLEN', KEYS[1]) > max do
            table.insert(evicted, redis.call('LPOP', KEYS[1]))
        end
        return evicted
        """

    /// The commands that keep `record`, in order: the record, then its user's list.
    package static func putCommands(_ record: KeptSession, windowMs: Int64, maxPerUser: Int) -> (record: [String], list: [String]) {
        let window = String(max(1, windowMs))
        return (
            ["SET", key(record.pid), JSONWriter.string(record.json), "PX", window],
            ["EVAL", listScript, "1", userKey(record.userID), key(record.pid), window, String(maxPerUser)]
        )
    }

    public func put(_ record: KeptSession, windowMs: Int64) {
        guard redis.isUp else { return }
        let commands = Self.putCommands(record, windowMs: windowMs, maxPerUser: maxPerUser)
        // Pipelined: the record is stored before it is listed.
        _ = redis.send(commands.record)
        redis.send(commands.list).whenSuccess { reply in
            for old in (reply.elements ?? []).compactMap(\.string) where old != Self.key(record.pid) {
                _ = self.redis.send(["DEL", old])
            }
        }
    }

    /// One hash, `relay:revoked`: user → cutoff; entries past their time are dropped when read.
    package static let revokedKey = "relay:revoked"

    public func saveRevocation(user: String, cutoff: Int64, ttlSeconds: Int64) {
        _ = redis.send(["HSET", Self.revokedKey, user, "\(cutoff):\(cutoff + ttlSeconds)"])
    }

    public func revocations(on loop: any EventLoop) -> EventLoopFuture<[(String, Int64)]> {
        redis.send(["HGETALL", Self.revokedKey]).map { reply -> [(String, Int64)] in
            var out: [(String, Int64)] = []
            for (k, v) in reply.pairs {
                guard let user = k.string, let text = v.string else { continue }
                let parts = text.split(separator: ":")
                guard parts.count == 2, let cutoff = Int64(parts[0]) else { continue }
                out.append((user, cutoff))
            }
            return out
        }.recover { _ in [] }.hop(to: loop)
    }

    /// Deletes the record only if it is the user's, atomically: two nodes never both recover
    /// one session, and another user's token leaves it in place. KEYS[1] record; ARGV[1] user.
    /// Returns {0} (none), {2} (another user's), {1, record}.
    package static let takeScript = """
        local v = redis.call('GET', KEYS[1])
        if not v then return {0} end
        local ok, record = pcall(cjson.decode, v)
        if not ok or record['u'] ~= ARGV[1] then return {2} end
        redis.call('DEL', KEYS[1])
        return {1, v}
        """

    package static func takeCommand(pid: String, user: String) -> [String] {
        ["EVAL", takeScript, "1", key(pid), user]
    }

    public func take(pid: String, user: String, on loop: any EventLoop) -> EventLoopFuture<KeptSessionTake> {
        redis.send(Self.takeCommand(pid: pid, user: user)).map { reply -> KeptSessionTake in
            guard let items = reply.elements, let status = items.first?.int else { return .notFound }
            switch status {
            case 1:
                // Taken: it leaves its user's list (the record's user is `user`).
                _ = self.redis.send(["LREM", Self.userKey(user), "0", Self.key(pid)])
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
