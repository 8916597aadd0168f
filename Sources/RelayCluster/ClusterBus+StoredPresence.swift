import NIOCore
import RelayBackends
import RelayRedis

extension ClusterBus {
    /// `node`'s entries in Redis: the rooms of its set, and in each room's hash the fields
    /// `node\u{1F}user` (one read per room, pipelined to each room's master).
    package func storedPresence(node: String) -> EventLoopFuture<[StoredPresence]> {
        let prefix = node + "\u{1F}"
        return redis.send(["SMEMBERS", Self.nodeRoomsKey(node)]).flatMap { reply in
            let rooms = (reply.elements ?? []).compactMap(\.string)
            let reads = rooms.map { room in
                self.redis.send(["HGETALL", Self.presenceKey(room)]).map { hash -> [StoredPresence] in
                    Self.entries(hash).compactMap { entry in
                        guard entry.user.hasPrefix(prefix) else { return nil }
                        return StoredPresence(room: room, user: String(entry.user.dropFirst(prefix.count)), devices: entry.devices)
                    }
                }
            }
            return EventLoopFuture.whenAllSucceed(reads, on: self.eventLoop).map { $0.flatMap { $0 } }
        }
    }
}
