/// When each user last disconnected, as one node saw it: the `lastSeen` of the presence API
/// on a single node (and a cluster node's fallback while Redis is down).
///
/// Bounded: at most `capacity` users are remembered (the least recently seen are forgotten
/// first) and for at most `retentionMs`. Time is passed in (wall-clock ms).
public struct LastSeenBook: Sendable {
    public let capacity: Int
    public let retentionMs: Int64
    private var seen: [String: Int64] = [:]
    /// Every record in the order it was made; a user's older records are skipped when popped.
    /// Kept at most twice `capacity` long.
    private var order = FIFO<(user: String, at: Int64)>()

    /// 30 days: what the Redis directory keeps too.
    public static let defaultRetentionMs: Int64 = 30 * 24 * 3_600_000

    public init(capacity: Int = 1_000_000, retentionMs: Int64 = LastSeenBook.defaultRetentionMs) {
        self.capacity = max(1, capacity)
        self.retentionMs = retentionMs
    }

    public var count: Int { seen.count }

    /// `user` disconnected at `at` (a later time wins over an earlier one).
    public mutating func record(_ user: String, at: Int64) {
        if let old = seen[user], old >= at { return }
        seen[user] = at
        order.append((user, at))
        while seen.count > capacity || order.count > 2 * capacity { dropOldest() }
        while let first = order.first, first.at + retentionMs < at { dropOldest() }
    }

    /// When `user` last disconnected, if it is remembered and within the retention at `now`.
    public func lastSeen(_ user: String, now: Int64) -> Int64? {
        guard let at = seen[user], at + retentionMs >= now else { return nil }
        return at
    }

    private mutating func dropOldest() {
        guard let first = order.popFirst() else { return }
        if seen[first.user] == first.at { seen.removeValue(forKey: first.user) }
    }
}
