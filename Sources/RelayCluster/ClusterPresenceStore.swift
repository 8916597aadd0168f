import Logging
import NIOCore
import RelayBackends
import RelayCore
import RelayRedis

/// Room presence across nodes, in Redis: each room's hash of per-node device counts
/// (`relay:presence:{room}`, fields `node\u{1F}user`) and its cluster totals
/// (`relay:presence-users:{room}`), the node's set of rooms (for its sweep), and the node's
/// field of each user's rooms (for the directory). Changed by one script per room.
package final class ClusterPresenceStore: Sendable {
    let nodeID: String
    let redis: RedisClient
    let logger: Logger

    init(nodeID: String, redis: RedisClient, logger: Logger) {
        self.nodeID = nodeID
        self.redis = redis
        self.logger = logger
    }

    /// The commands of one presence change, in the order they are sent: the node's room set
    /// first (so a sweep of this node finds the room whatever happens next), the room's script
    /// (atomic: its before/after), then this node's field of the user's rooms. Each touches one
    /// slot: the node's, the room's, the user's.
    package static func commands(node: String, room: String, user: String, devices: Int) -> (nodeRooms: [String]?, script: [String], userRooms: [String]) {
        let field = ClusterKeys.userRoomField(room: room, node: node)
        return (
            devices > 0 ? ["SADD", ClusterKeys.nodeRooms(node), room] : nil,
            ["EVAL", ClusterScripts.updatePresence, "2", ClusterKeys.presence(room), ClusterKeys.presenceUsers(room), node, user, String(devices)],
            devices > 0 ? ["HSET", ClusterKeys.userRooms(user), field, String(devices)] : ["HDEL", ClusterKeys.userRooms(user), field]
        )
    }

    /// Sets this node's device count for `user` in `room`; returns the cluster totals before and
    /// after, and the room's cluster presence.
    package func update(room: String, user: String, devices: Int) -> EventLoopFuture<PresenceUpdate> {
        let commands = Self.commands(node: nodeID, room: room, user: user, devices: devices)
        // Pipelined in this order: one Redis runs them so; in a cluster each key's commands
        // keep their order (one link per master) while the three slots may interleave, which
        // matters only for a crash between them (the sweeps tolerate either leftover).
        if let add = commands.nodeRooms { redis.send(add).whenFailure { [logger] in RedisRefusal.log(logger, $0, "node rooms") } }
        let script = redis.send(commands.script)
        script.whenFailure { [logger] in RedisRefusal.log(logger, $0, "presence") }
        redis.send(commands.userRooms).whenFailure { [logger] in RedisRefusal.log(logger, $0, "user rooms") }
        return script.flatMapThrowing { reply in
            guard let items = reply.elements, items.count == 3, let before = items[0].int, let after = items[1].int else {
                throw RESPError.server("unexpected presence reply")
            }
            return PresenceUpdate(before: Int(before), after: Int(after), presence: Self.entries(items[2]))
        }
    }

    /// The room's presence across every node.
    package func read(room: String) -> EventLoopFuture<[PresenceEntry]> {
        redis.send(["HGETALL", ClusterKeys.presenceUsers(room)]).map(Self.entries)
    }

    /// `node`'s entries in Redis: the rooms of its set, and in each room's hash the fields
    /// `node\u{1F}user` (one read per room, pipelined to each room's master).
    package func stored(node: String) -> EventLoopFuture<[StoredPresence]> {
        let prefix = node + "\u{1F}"
        let redis = redis
        return redis.send(["SMEMBERS", ClusterKeys.nodeRooms(node)]).flatMap { reply in
            let rooms = (reply.elements ?? []).compactMap(\.string)
            let reads = rooms.map { room in
                redis.send(["HGETALL", ClusterKeys.presence(room)]).map { hash -> [StoredPresence] in
                    Self.entries(hash).compactMap { entry in
                        guard entry.user.hasPrefix(prefix) else { return nil }
                        return StoredPresence(room: room, user: String(entry.user.dropFirst(prefix.count)), devices: entry.devices)
                    }
                }
            }
            return EventLoopFuture.whenAllSucceed(reads, on: redis.eventLoop).map { $0.flatMap { $0 } }
        }
    }

    /// `user → count` from a RESP3 map or a RESP2 flat array, sorted by user.
    package static func entries(_ value: RESPValue) -> [PresenceEntry] {
        value.pairs.compactMap { k, v in
            guard let user = k.string, let n = v.int else { return nil }
            return PresenceEntry(user: user, devices: Int(n))
        }.sorted { $0.user < $1.user }
    }
}
