import NIOCore
import RelayCore

/// Users' presence for the backend API: this node's view, handed to the presence manager, which
/// answers with the cluster's (or this view, degraded, while Redis is down).
extension Hub {
    /// This node's view of `users` (their rooms too when `withRooms`).
    func localUsers(_ users: [String], withRooms: Bool) -> [UserPresence] {
        let now = clock.wallMs()
        let found = users.map { user in
            userShards.shard(for: user).withLockedValue { s in (user, s.directory.connections(of: user), s.lastSeen.lastSeen(user, now: now)) }
        }
        return found.map { user, connections, lastSeen in
            var rooms: [String] = []
            if withRooms {
                var all = Set<String>()
                for c in connections { all.formUnion(self.rooms(of: c)) }
                rooms = all.sorted()
            }
            return UserPresence(user: user, devices: connections.count, rooms: rooms, lastSeen: lastSeen)
        }
    }

    /// The users' presence, in `users`' order: cluster-wide when the node is in a cluster and
    /// Redis is up, this node's otherwise (`degraded` in a cluster).
    public func userPresence(_ users: [String], withRooms: Bool, on loop: any EventLoop) -> EventLoopFuture<PresenceAnswer<[UserPresence]>> {
        presenceManager.users(localUsers(users, withRooms: withRooms), withRooms: withRooms, on: loop)
    }

    /// The room's presence (devices per user), saying whether it is only this node's.
    public func roomPresenceAnswer(room: String, on loop: any EventLoop) -> EventLoopFuture<PresenceAnswer<[PresenceEntry]>> {
        presenceManager.roomPresence(room: room, local: presence(room: room), on: loop)
    }

    /// States this node's sockets per user again (Redis came back). Under every user shard's
    /// lock at once (taken in index order; nothing else holds two), so the restatement — which
    /// replaces the node's whole set in Redis — is ordered with the connects and disconnects
    /// around it. Rare: once per Redis recovery.
    func restateDirectory() {
        var counts: [String: Int] = [:]
        func lock(from index: Int) {
            guard index < userShards.boxes.count else { return presenceManager.restateUsers(counts) }
            userShards.boxes[index].withLockedValue { s in
                counts.merge(s.directory.connectionCounts()) { a, _ in a }
                lock(from: index + 1)
            }
        }
        lock(from: 0)
    }
}
