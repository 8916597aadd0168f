import NIOCore
import RelayCore
import RelayRedis

/// The cluster's user directory in Redis (DirectoryScripts): each node's sockets per user, the
/// last disconnect, and the users' rooms (kept by the presence scripts).
extension ClusterBus {
    package static func directoryKey(_ user: String) -> String { "relay:directory:{\(user)}" }
    package static func userRoomsKey(_ user: String) -> String { "relay:user-rooms:{\(user)}" }
    package static func nodeUsersKey(_ node: String) -> String { "relay:node-users:\(node)" }
    /// How long a user's last seen is kept after their last socket went away.
    package static let lastSeenRetentionMs = LastSeenBook.defaultRetentionMs

    /// This node has `devices` sockets of `user` now (`disconnected`: one just went away).
    @discardableResult
    package func updateUser(_ user: String, devices: Int, disconnected: Bool) -> EventLoopFuture<RESPValue> {
        redis.send([
            "EVAL", DirectoryScripts.updateUser, "2", Self.directoryKey(user), Self.nodeUsersKey(nodeID),
            nodeID, user, String(devices), disconnected ? "1" : "0", String(Self.lastSeenRetentionMs),
        ])
    }

    /// Each user's sockets on all nodes and last disconnect (ms), in `users`' order.
    package func readUsers(_ users: [String]) -> EventLoopFuture<[(devices: Int, lastSeen: Int64?)]> {
        guard !users.isEmpty else { return eventLoop.makeSucceededFuture([]) }
        return redis.send(["EVAL", DirectoryScripts.readUsers, String(users.count)] + users.map(Self.directoryKey)).flatMapThrowing { reply in
            guard let items = reply.elements, items.count == users.count else { throw RESPError.server("unexpected directory reply") }
            return try items.map { item in
                guard let pair = item.elements, pair.count == 2, let devices = pair[0].int, let seen = pair[1].int else {
                    throw RESPError.server("unexpected directory entry")
                }
                return (Int(devices), seen >= 0 ? seen : nil)
            }
        }
    }

    /// The rooms each user has presence in, on any node, sorted (one pipelined read per user).
    package func userRooms(_ users: [String]) -> EventLoopFuture<[[String]]> {
        let reads = users.map { user in
            redis.send(["HKEYS", Self.userRoomsKey(user)]).map { reply in (reply.elements ?? []).compactMap(\.string).sorted() }
        }
        return EventLoopFuture.whenAllSucceed(reads, on: eventLoop)
    }

    /// Removes a dead (or stopping) node's sockets from the directory.
    package func sweepUsers(node: String) -> EventLoopFuture<RESPValue> {
        redis.send(["EVAL", DirectoryScripts.sweepUsers, "1", Self.nodeUsersKey(node), node, String(Self.lastSeenRetentionMs)])
    }

    /// States this node's sockets per user again, replacing what the directory had of it.
    @discardableResult
    package func restateUsers(_ counts: [String: Int]) -> EventLoopFuture<RESPValue> {
        var args = ["EVAL", DirectoryScripts.restateNode, "1", Self.nodeUsersKey(nodeID), nodeID, String(Self.lastSeenRetentionMs)]
        for (user, n) in counts.sorted(by: { $0.key < $1.key }) where n > 0 {
            args.append(user)
            args.append(String(n))
        }
        return redis.send(args)
    }
}
