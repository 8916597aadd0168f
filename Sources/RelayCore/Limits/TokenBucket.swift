/// A token bucket: `capacity` tokens, refilled at `ratePerSecond`. Time in milliseconds.
public struct TokenBucket: Sendable {
    public let capacity: Double
    public let ratePerSecond: Double
    private var level: BucketLevel

    public init(capacity: Double, ratePerSecond: Double, now: Int64) {
        self.capacity = capacity
        self.ratePerSecond = ratePerSecond
        self.level = BucketLevel(capacity: capacity, now: now)
    }

    /// Takes `cost` tokens if there are enough; `false` means the caller is over its rate.
    public mutating func tryConsume(_ cost: Double = 1, now: Int64) -> Bool {
        level.tryConsume(cost, capacity: capacity, ratePerSecond: ratePerSecond, now: now)
    }

    /// Tokens available at `now` (without consuming).
    public mutating func available(now: Int64) -> Double {
        level.available(capacity: capacity, ratePerSecond: ratePerSecond, now: now)
    }
}

/// What changes in a token bucket — its tokens and when they were last counted — without its
/// capacity and rate, which the caller passes in. For the buckets every session keeps against
/// one shared configuration (packets, bytes, event bytes, error replies, events): 16 bytes
/// each instead of `TokenBucket`'s 32. The arithmetic is `TokenBucket`'s.
public struct BucketLevel: Sendable {
    private var tokens: Double
    private var last: Int64

    /// A full bucket at `now`.
    public init(capacity: Double, now: Int64) {
        self.tokens = capacity
        self.last = now
    }

    /// A full bucket of `budget` at `now`.
    public init(_ budget: EventRateLimiter.Budget, now: Int64) {
        self.init(capacity: budget.burst, now: now)
    }

    private mutating func refill(capacity: Double, ratePerSecond: Double, now: Int64) {
        if now > last {
            tokens = min(capacity, tokens + Double(now - last) * ratePerSecond / 1000)
            last = now
        }
    }

    /// Takes `cost` tokens if there are enough; `false` means the caller is over its rate.
    public mutating func tryConsume(_ cost: Double = 1, capacity: Double, ratePerSecond: Double, now: Int64) -> Bool {
        refill(capacity: capacity, ratePerSecond: ratePerSecond, now: now)
        guard tokens >= cost else { return false }
        tokens -= cost
        return true
    }

    /// Takes `cost` tokens of `budget` (its burst is the capacity) if there are enough.
    public mutating func tryConsume(_ cost: Double = 1, _ budget: EventRateLimiter.Budget, now: Int64) -> Bool {
        tryConsume(cost, capacity: budget.burst, ratePerSecond: budget.perSecond, now: now)
    }

    /// Tokens available at `now` (without consuming).
    public mutating func available(capacity: Double, ratePerSecond: Double, now: Int64) -> Double {
        refill(capacity: capacity, ratePerSecond: ratePerSecond, now: now)
        return tokens
    }
}
