import NIOConcurrencyHelpers
import NIOCore
import RelayCore
import RelayRedis

/// Where disconnected sessions wait to be recovered, by `pid`: in memory on one node, in Redis
/// in a cluster (so another node can recover them). A record is taken at most once.
public protocol SessionStore: AnyObject, Sendable {
    /// Keeps `record` for `windowMs`.
    func put(_ record: SessionRecord, windowMs: Int64)
    /// Takes the record of `pid` (removing it); `nil` if there is none (expired, taken, never
    /// existed). Fails when the store cannot be reached.
    func take(pid: String, on loop: any EventLoop) -> EventLoopFuture<SessionRecord?>
}

/// Sessions of a single node, in memory; expired ones are dropped as new ones come in.
public final class MemorySessionStore: SessionStore {
    private struct Kept {
        var record: SessionRecord
        var expiresAtMs: Int64
    }

    private let state = NIOLockedValueBox<[String: Kept]>([:])
    private let wallMs: @Sendable () -> Int64
    /// Bounds the records kept whatever the window (oldest dropped first).
    let maxRecords: Int

    public init(wallMs: @escaping @Sendable () -> Int64, maxRecords: Int = 100_000) {
        self.wallMs = wallMs
        self.maxRecords = maxRecords
    }

    public func put(_ record: SessionRecord, windowMs: Int64) {
        let now = wallMs()
        state.withLockedValue { kept in
            if kept.count >= maxRecords {
                kept = kept.filter { $0.value.expiresAtMs > now }
                if kept.count >= maxRecords, let oldest = kept.min(by: { $0.value.expiresAtMs < $1.value.expiresAtMs })?.key {
                    kept.removeValue(forKey: oldest)
                }
            }
            kept[record.pid] = Kept(record: record, expiresAtMs: now + windowMs)
        }
    }

    public func take(pid: String, on loop: any EventLoop) -> EventLoopFuture<SessionRecord?> {
        let now = wallMs()
        let kept = state.withLockedValue { $0.removeValue(forKey: pid) }
        guard let kept, kept.expiresAtMs > now else { return loop.makeSucceededFuture(nil) }
        return loop.makeSucceededFuture(kept.record)
    }

    public var count: Int { state.withLockedValue { $0.count } }
}

/// Sessions in Redis: `relay:session:<pid>` with the record as JSON, expiring with the window,
/// taken with GETDEL (atomically: two nodes never both recover one session).
public final class RedisSessionStore: SessionStore {
    let redis: RedisClient

    public init(redis: RedisClient) {
        self.redis = redis
    }

    static func key(_ pid: String) -> String { "relay:session:\(pid)" }

    public func put(_ record: SessionRecord, windowMs: Int64) {
        guard redis.isUp else { return }
        _ = redis.send(["SET", Self.key(record.pid), JSONWriter.string(record.json), "PX", String(max(1, windowMs))])
    }

    public func take(pid: String, on loop: any EventLoop) -> EventLoopFuture<SessionRecord?> {
        redis.send(["GETDEL", Self.key(pid)]).map { reply -> SessionRecord? in
            guard let text = reply.string, let json = try? JSONParser.parse(text) else { return nil }
            return SessionRecord(json: json)
        }.hop(to: loop)
    }
}
