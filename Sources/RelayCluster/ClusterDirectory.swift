import Logging
import NIOCore
import RelayBackends
import RelayCore
import RelayRedis
import RelayLocks

/// The cluster's user directory in Redis (DirectoryScripts): each node's sockets per user, the
/// last disconnect, and the users' rooms (each node's fields, kept by the presence steps).
///
/// Every script touches one user's keys (one slot); the node's set of users
/// (`relay:node-users:{node}`, its own slot) is written with plain SADD/SREM around them: SADD
/// before a user's script, SREM after, so a sweep that finds the set finds every user the node
/// may have sockets of. Only this node (and the sweeper of a dead node) writes its set.
package final class ClusterDirectory: Sendable {
    /// How long a user's last seen is kept after their last socket went away.
    package static let lastSeenRetentionMs = LastSeenBook.defaultRetentionMs

    let nodeID: String
    let redis: RedisClient
    let logger: Logger
    /// The users this node has told the directory it has sockets of (its `relay:node-users`
    /// set as this node wrote it). Directory writes are sent under this lock, so a restatement
    /// and the connects and disconnects around it reach Redis in order.
    package let statedUsers = AuditedLock<Set<String>>([])

    init(nodeID: String, redis: RedisClient, logger: Logger) {
        self.nodeID = nodeID
        self.redis = redis
        self.logger = logger
    }

    /// One user's directory update on `node`.
    package static func updateUserCommand(node: String, user: String, devices: Int, disconnected: Bool) -> [String] {
        ["EVAL", DirectoryScripts.updateUser, "1", ClusterKeys.directory(user), node, String(devices), disconnected ? "1" : "0", String(lastSeenRetentionMs)]
    }

    /// `node`'s sockets of `user` are gone (`rooms`: its fields of the user's rooms too).
    package static func dropNodeCommand(node: String, user: String, rooms: Bool) -> [String] {
        ["EVAL", DirectoryScripts.dropNode, "2", ClusterKeys.directory(user), ClusterKeys.userRooms(user), node, String(lastSeenRetentionMs), rooms ? "1" : "0"]
    }

    /// This node has `devices` sockets of `user` now (`disconnected`: one just went away).
    /// Sent under `statedUsers`' lock: ordered with a restatement.
    package func updateUser(_ user: String, devices: Int, disconnected: Bool) {
        let node = nodeID
        statedUsers.withLockedValue { stated in
            if devices > 0 {
                stated.insert(user)
                send(["SADD", ClusterKeys.nodeUsers(node), user], "node users")
                send(Self.updateUserCommand(node: node, user: user, devices: devices, disconnected: disconnected), "directory")
            } else {
                stated.remove(user)
                send(Self.updateUserCommand(node: node, user: user, devices: devices, disconnected: disconnected), "directory")
                send(["SREM", ClusterKeys.nodeUsers(node), user], "node users")
            }
        }
    }

    /// Sends a command whose answer is not needed; logs a refusal.
    private func send(_ command: [String], _ what: String) {
        redis.send(command).whenFailure { [logger] in RedisRefusal.log(logger, $0, what) }
    }

    /// Each user's sockets on all nodes and last disconnect (ms), in `users`' order (one
    /// pipelined read per user: each user's key is in its own slot).
    package func readUsers(_ users: [String]) -> EventLoopFuture<[(devices: Int, lastSeen: Int64?)]> {
        let reads = users.map { user in
            redis.send(["HGETALL", ClusterKeys.directory(user)]).map { reply -> (devices: Int, lastSeen: Int64?) in
                var devices = 0
                var last: Int64?
                for (key, value) in reply.pairs {
                    guard let field = key.string, let text = value.string else { continue }
                    if field == "seen" {
                        last = Int64(text)
                    } else if field.hasPrefix("n:"), let n = Int(text) {
                        devices += n
                    }
                }
                return (devices, last)
            }
        }
        return EventLoopFuture.whenAllSucceed(reads, on: redis.eventLoop)
    }

    /// The rooms each user has presence in, on any node, sorted (one pipelined read per user;
    /// the fields are `room\u{1F}node`).
    package func userRooms(_ users: [String]) -> EventLoopFuture<[[String]]> {
        let reads = users.map { user in
            redis.send(["HKEYS", ClusterKeys.userRooms(user)]).map { reply in
                Set((reply.elements ?? []).compactMap(\.string).compactMap(ClusterKeys.room(ofUserRoomField:))).sorted()
            }
        }
        return EventLoopFuture.whenAllSucceed(reads, on: redis.eventLoop)
    }

    /// Removes a dead (or stopping) node's sockets from the directory, with its fields of its
    /// users' rooms: one script per user (pipelined), then the swept users leave its set.
    package func sweepUsers(node: String) -> EventLoopFuture<Void> {
        let redis = redis
        return redis.send(["SMEMBERS", ClusterKeys.nodeUsers(node)]).flatMap { reply in
            let users = (reply.elements ?? []).compactMap(\.string)
            guard !users.isEmpty else { return redis.eventLoop.makeSucceededVoidFuture() }
            let drops = users.map { redis.send(Self.dropNodeCommand(node: node, user: $0, rooms: true)) }
            return EventLoopFuture.whenAllSucceed(drops, on: redis.eventLoop).flatMap { _ in
                redis.send(["SREM", ClusterKeys.nodeUsers(node)] + users).map { _ in () }
            }
        }
    }

    /// States this node's sockets per user again, replacing what the directory had of it.
    ///
    /// Under `statedUsers`' lock (so the connects and disconnects after it are sent after it):
    /// the users this node had stated and no longer has are dropped, the ones it has are set.
    /// Then the node's set in Redis is read, and users in it that this node does not hold at
    /// that moment (left from an earlier run under the same node id) are dropped, under the
    /// lock again: a user connecting meanwhile is in `statedUsers` and stays.
    package func restateUsers(_ counts: [String: Int]) {
        let node = nodeID
        let keep = counts.filter { $0.value > 0 }
        statedUsers.withLockedValue { stated in
            let gone = stated.subtracting(keep.keys).sorted()
            for user in gone {
                send(Self.dropNodeCommand(node: node, user: user, rooms: false), "directory")
            }
            if !gone.isEmpty { send(["SREM", ClusterKeys.nodeUsers(node)] + gone, "node users") }
            let users = keep.keys.sorted()
            if !users.isEmpty { send(["SADD", ClusterKeys.nodeUsers(node)] + users, "node users") }
            for user in users {
                send(Self.updateUserCommand(node: node, user: user, devices: keep[user] ?? 0, disconnected: false), "directory")
            }
            stated = Set(users)
        }
        redis.send(["SMEMBERS", ClusterKeys.nodeUsers(node)]).whenSuccess { reply in
            let listed = (reply.elements ?? []).compactMap(\.string)
            self.statedUsers.withLockedValue { stated in
                let stale = listed.filter { !stated.contains($0) }
                for user in stale {
                    self.send(Self.dropNodeCommand(node: node, user: user, rooms: false), "directory")
                }
                if !stale.isEmpty { self.send(["SREM", ClusterKeys.nodeUsers(node)] + stale, "node users") }
            }
        }
    }
}
