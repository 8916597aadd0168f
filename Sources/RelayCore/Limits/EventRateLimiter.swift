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
    /// The configured budgets (shared with the configuration: no copy per session).
    private let budgets: [RateClass: Budget]
    /// A class's bucket, made at its first event: until then it would be full anyway, and most
    /// sockets only ever use a few classes (one dictionary less per idle socket).
    private var perClass: [RateClass: TokenBucket] = [:]

    public init(overall: Budget, perClass: [RateClass: Budget], now: Int64) {
        self.overall = TokenBucket(capacity: overall.burst, ratePerSecond: overall.perSecond, now: now)
        self.budgets = perClass
    }

    /// `true` if the event may pass. A refused event consumes nothing from the overall budget.
    public mutating func allow(_ rateClass: RateClass, now: Int64) -> Bool {
        if let budget = budgets[rateClass] {
            var bucket = perClass[rateClass] ?? TokenBucket(capacity: budget.burst, ratePerSecond: budget.perSecond, now: now)
            guard bucket.tryConsume(now: now) else {
                perClass[rateClass] = bucket
                return false
            }
            perClass[rateClass] = bucket
        }
        return overall.tryConsume(now: now)
    }
}
