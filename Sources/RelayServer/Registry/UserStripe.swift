import RelayCore

/// What the registry keeps about the users whose ids hash to one stripe: their connections (and
/// the loops they live on), when they were last seen. A user's connects, disconnects and the
/// presence updates they send (to Redis, to webhooks) are ordered by this stripe's lock.
struct UserStripe: Sendable {
    var directory: ConnectionDirectory
    var lastSeen: LastSeenBook
    /// Users whose last connection here dropped within the presence grace: still online (the
    /// store, the webhooks and the user's stream subscription were not told otherwise) until
    /// the departure ends or the user connects again.
    var departing: [String: Departing] = [:]

    struct Departing: Sendable {
        /// When the grace ends (monotonic ms).
        var until: Int64
        /// When the last connection dropped (wall ms): the disconnect the store is told.
        var at: Int64
    }
}
