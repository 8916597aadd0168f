/// Token buckets keyed by a string (e.g. a client IP for failed authentications), with a
/// bounded number of keys so that many distinct keys cannot grow memory without limit.
public struct KeyedRateLimiter: Sendable {
    public let budget: EventRateLimiter.Budget
    public let maxKeys: Int
    private var buckets: [String: TokenBucket] = [:]

    public init(budget: EventRateLimiter.Budget, maxKeys: Int = 100_000) {
        self.budget = budget
        self.maxKeys = maxKeys
    }

    /// Whether `key` still has budget, without consuming.
    public mutating func isAllowed(_ key: String, now: Int64) -> Bool {
        guard var bucket = buckets[key] else { return true }
        let ok = bucket.available(now: now) >= 1
        buckets[key] = bucket
        return ok
    }

    /// Records `cost` events for `key` (all or none); `false` if that is over budget.
    @discardableResult
    public mutating func record(_ key: String, cost: Double = 1, now: Int64) -> Bool {
        if buckets[key] == nil {
            if buckets.count >= maxKeys { prune(now: now) }
            if buckets.count >= maxKeys { buckets.removeAll(keepingCapacity: true) }
            buckets[key] = TokenBucket(capacity: budget.burst, ratePerSecond: budget.perSecond, now: now)
        }
        return buckets[key]?.tryConsume(cost, now: now) ?? false  // inserted just above, so never nil
    }

    /// Drops keys whose bucket has refilled completely (they carry no state worth keeping).
    public mutating func prune(now: Int64) {
        buckets = buckets.filter { _, b in
            var b = b
            return b.available(now: now) < b.capacity
        }
    }

    public var keyCount: Int { buckets.count }
}
