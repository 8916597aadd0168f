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

    /// The configured budgets, made once and shared by every limiter of a server (a session
    /// keeps a pointer to them, not a copy).
    public final class Budgets: Sendable {
        public let overall: Budget
        public let perClass: [RateClass: Budget]

        public init(overall: Budget, perClass: [RateClass: Budget]) {
            self.overall = overall
            self.perClass = perClass
        }
    }

    private let budgets: Budgets
    private var overall: BucketLevel
    /// A class's bucket, made at its first event: until then it would be full anyway, and most
    /// sockets only ever use a few classes (one dictionary less per idle socket).
    private var perClass: [RateClass: BucketLevel] = [:]

    public init(overall: Budget, perClass: [RateClass: Budget], now: Int64) {
        self.init(budgets: Budgets(overall: overall, perClass: perClass), now: now)
    }

    /// A limiter on shared budgets.
    public init(budgets: Budgets, now: Int64) {
        self.budgets = budgets
        self.overall = BucketLevel(budgets.overall, now: now)
    }

    /// How many of `count` events of `rateClass` may pass now (each one as `allow` decides, in
    /// order, stopping at the first refused): the joins a CONNECT names.
    public mutating func take(_ rateClass: RateClass, count: Int, now: Int64) -> Int {
        var allowed = 0
        while allowed < count, allow(rateClass, now: now) { allowed += 1 }
        return allowed
    }

    /// Spends up to `count` events of `rateClass` that happened and cannot be refused (the rooms
    /// a `41` leaves): what the budgets hold is taken, and later events wait for the refill.
    public mutating func spend(_ rateClass: RateClass, count: Int, now: Int64) {
        _ = take(rateClass, count: count, now: now)
    }

    /// `true` if the event may pass. A refused event consumes nothing from the overall budget.
    public mutating func allow(_ rateClass: RateClass, now: Int64) -> Bool {
        if let budget = budgets.perClass[rateClass] {
            var bucket = perClass[rateClass] ?? BucketLevel(budget, now: now)
            guard bucket.tryConsume(1, budget, now: now) else {
                perClass[rateClass] = bucket
                return false
            }
            perClass[rateClass] = bucket
        }
        return overall.tryConsume(1, budgets.overall, now: now)
    }
}
