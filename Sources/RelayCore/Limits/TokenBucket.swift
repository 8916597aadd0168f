/// A token bucket: `capacity` tokens, refilled at `ratePerSecond`. Time in milliseconds.
public struct TokenBucket: Sendable {
    public let capacity: Double
    public let ratePerSecond: Double
    private var tokens: Double
    private var last: Int64

    public init(capacity: Double, ratePerSecond: Double, now: Int64) {
        self.capacity = capacity
        self.ratePerSecond = ratePerSecond
        self.tokens = capacity
        self.last = now
    }

    private mutating func refill(now: Int64) {
        if now > last {
            tokens = min(capacity, tokens + Double(now - last) * ratePerSecond / 1000)
            last = now
        }
    }

    /// Takes `cost` tokens if there are enough; `false` means the caller is over its rate.
    public mutating func tryConsume(_ cost: Double = 1, now: Int64) -> Bool {
        refill(now: now)
        guard tokens >= cost else { return false }
        tokens -= cost
        return true
    }

    /// Tokens available at `now` (without consuming).
    public mutating func available(now: Int64) -> Double {
        refill(now: now)
        return tokens
    }
}
