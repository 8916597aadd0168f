import Logging
import NIOCore
import RelayRedis

/// This node's heartbeat, and the removal of a dead node's presence and directory entries: a
/// node whose heartbeat is older than `nodeTTLMs` is claimed by one survivor (a `SET NX` lock),
/// which sweeps it and announces the users gone from the cluster.
///
/// `@unchecked Sendable`: `onPresenceGone` and `onSweepClaimed` are set once, before `start`,
/// and only read afterwards; `heartbeatTask` is touched only by `start` and `stop`.
package final class NodeSweeper: @unchecked Sendable {
    let nodeID: String
    let redis: RedisClient
    let options: ClusterBus.Options
    let logger: Logger
    let directory: ClusterDirectory
    /// A dead node's user is gone from a room cluster-wide (set by the hub before `start`).
    package var onPresenceGone: (@Sendable (_ room: String, _ user: String) -> Void)?
    /// Webhooks: this node claimed a dead node's sweep (set before `start`).
    package var onSweepClaimed: (@Sendable (_ node: String) -> Void)?
    private var heartbeatTask: RepeatedTask?

    init(nodeID: String, redis: RedisClient, options: ClusterBus.Options, directory: ClusterDirectory, logger: Logger) {
        self.nodeID = nodeID
        self.redis = redis
        self.options = options
        self.directory = directory
        self.logger = logger
    }

    package static func heartbeatCommand(node: String, ttlMs: Int64) -> [String] {
        ["EVAL", ClusterScripts.heartbeat, "1", ClusterKeys.nodes, node, String(ttlMs)]
    }

    /// The sweep of one room of a dead node (the room's slot).
    package static func sweepRoomCommand(node: String, room: String) -> [String] {
        ["EVAL", ClusterScripts.sweepRoom, "2", ClusterKeys.presence(room), ClusterKeys.presenceUsers(room), node]
    }

    func start() {
        heartbeatTask = redis.eventLoop.scheduleRepeatedTask(initialDelay: .milliseconds(options.heartbeatMs), delay: .milliseconds(options.heartbeatMs)) { [weak self] _ in
            guard let self, self.redis.isUp else { return }
            _ = self.beat()
        }
    }

    /// Stops the heartbeat and leaves the cluster's presence at once rather than after the TTL.
    func stop() async {
        heartbeatTask?.cancel()
        if redis.isUp { _ = try? await sweep(node: nodeID).get() }
    }

    /// Sends this node's heartbeat; its answer names the dead nodes, which are then claimed.
    func beat() -> EventLoopFuture<RESPValue> {
        let sent = redis.send(Self.heartbeatCommand(node: nodeID, ttlMs: options.nodeTTLMs))
        sent.whenSuccess { [weak self] reply in
            guard let self else { return }
            for dead in (reply.elements ?? []).compactMap(\.string) where dead != self.nodeID {
                self.claimAndSweep(dead)
            }
        }
        return sent
    }

    /// One surviving node (whichever takes the lock) removes a dead node's presence and
    /// announces the users who are gone.
    private func claimAndSweep(_ dead: String) {
        redis.send(["SET", "relay:sweep:\(dead)", nodeID, "NX", "PX", String(options.nodeTTLMs * 5)]).whenSuccess { [weak self] reply in
            guard let self, reply == .simpleString("OK") else { return }
            self.logger.warning("node presumed dead; removing its presence", metadata: ["node": "\(dead)"])
            self.onSweepClaimed?(dead)
            self.sweep(node: dead).whenSuccess { gone in
                for (room, user) in gone { self.onPresenceGone?(room, user) }
            }
        }
    }

    /// Removes every presence entry of `node`; returns (room, user) pairs gone from the cluster.
    /// Per room (one slot each, pipelined): the room's script, then the node's field of each of
    /// its users' rooms; then the swept rooms leave the node's set, then its users are swept.
    /// Only the sweeper writes a dead node's keys, so the steps need not be one transaction.
    package func sweep(node: String) -> EventLoopFuture<[(String, String)]> {
        let (redis, logger, directory) = (redis, logger, directory)
        return redis.send(["SMEMBERS", ClusterKeys.nodeRooms(node)]).flatMap { reply in
            let rooms = (reply.elements ?? []).compactMap(\.string)
            let futures = rooms.map { room in
                redis.send(Self.sweepRoomCommand(node: node, room: room)).map { r -> [(String, String)] in
                    r.pairs.compactMap { user, left in
                        guard let user = user.string else { return nil }
                        redis.send(["HDEL", ClusterKeys.userRooms(user), ClusterKeys.userRoomField(room: room, node: node)])
                            .whenFailure { RedisRefusal.log(logger, $0, "user rooms") }
                        return left.int == 1 ? (room, user) : nil
                    }
                }
            }
            return EventLoopFuture.whenAllSucceed(futures, on: redis.eventLoop).flatMap { gone in
                let done = rooms.isEmpty ? redis.eventLoop.makeSucceededFuture(RESPValue.integer(0)) : redis.send(["SREM", ClusterKeys.nodeRooms(node)] + rooms)
                return done.map { _ in gone.flatMap { $0 } }
            }
        }.flatMap { gone in
            directory.sweepUsers(node: node).flatMap { _ in
                redis.send(["ZREM", ClusterKeys.nodes, node])
            }.map { _ in gone }
        }
    }
}
