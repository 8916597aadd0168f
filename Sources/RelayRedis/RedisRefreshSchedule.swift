import NIOCore

/// When a `RedisClient` looks for its masters again: one look at a time (one asked for during
/// it runs right after), at most one scheduled, the periodic one of a cluster, the backoff
/// between looks that failed, and none once the client stopped. Touched only on the client's
/// event loop.
struct RedisRefreshSchedule {
    /// A look is under way.
    var running = false
    /// Another look was asked for during it.
    var again = false
    /// The client stopped: no more looks.
    private(set) var stopped = false
    private var scheduled: Scheduled<Void>?
    private var periodic: RepeatedTask?
    /// Looks that failed in a row (the backoff's exponent).
    private var attempt = 0

    /// Whether a look may be scheduled now (none is, and the client runs).
    var maySchedule: Bool { !stopped && scheduled == nil }

    mutating func schedule(_ task: Scheduled<Void>) { scheduled = task }

    /// The scheduled look started.
    mutating func scheduledStarted() { scheduled = nil }

    mutating func repeatEvery(_ task: RepeatedTask) { periodic = task }

    /// Every slot is served again: the next failure starts the backoff over.
    mutating func succeeded() { attempt = 0 }

    /// Exponential backoff with jitter: half to all of min(cap, initial · 2^attempt).
    mutating func backoff(initial: TimeAmount, cap: TimeAmount) -> TimeAmount {
        let base = min(cap.nanoseconds, initial.nanoseconds << min(attempt, 16))
        attempt += 1
        return .nanoseconds(Int64.random(in: base / 2...max(base / 2, base)))
    }

    /// No more looks: the scheduled and periodic ones are cancelled.
    mutating func stop() {
        stopped = true
        scheduled?.cancel()
        scheduled = nil
        periodic?.cancel()
        periodic = nil
    }
}
