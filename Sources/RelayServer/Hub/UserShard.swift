import RelayCore

/// What the hub keeps about the users whose ids hash to one shard: their connections (and the
/// loops they live on), when they were last seen. A user's connects, disconnects and the
/// presence updates they send (to Redis, to webhooks) are ordered by this shard's lock.
struct UserShard: Sendable {
    var directory: ConnectionDirectory
    var lastSeen: LastSeenBook
}
