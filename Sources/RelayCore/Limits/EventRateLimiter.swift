/// Per-connection event rate limits: one overall budget and one per rate class.
public struct EventRateLimiter: Sendable {
    /// Events per second and burst for one budget.
    public struct Budget: Sendable, Equatable {
        public var perSecond: Double
        public var burst: Double
        public init(perSecond: Double, burst: Double) {
            self.perSecond = perSecond
            self.burst = burst
        }
    }

    private var overall: TokenBucket
    private var perClass: [RateClass: TokenBucket]

    public init(overall: Budget, perClass: [RateClass: Budget], now: Int64) {
        self.overall = TokenBucket(capacity: overall.burst, ratePerSecond: overall.perSecond, now: now)
        self.perClass = perClass.mapValues { TokenBucket(capacity: $0.burst, ratePerSecond: $0.perSecond, now: now) }
    }

    /// `true` if the event may pass. A refused event consumes nothing from the overall budget.
    public mutating func allow(_ rateClass: RateClass, now: Int64) -> Bool {
        if var bucket = perClass[rateClass] {
            guard bucket.tryConsume(now: now) else {
                perClass[rateClass] = bucket
                return false
            }
            perClass[rateClass] = bucket
        }
        return overall.tryConsume(now: now)
    }
}
