import RelayCore

/// What the registry keeps about the users whose ids hash to one stripe: their connections (and
/// the loops they live on), when they were last seen. A user's connects, disconnects and the
/// presence updates they send (to Redis, to webhooks) are ordered by this stripe's lock.
struct UserStripe: Sendable {
    var directory: ConnectionDirectory
    var lastSeen: LastSeenBook
}
