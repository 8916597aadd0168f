/// When a failed webhook batch is tried again: exponential backoff with jitter.
///
/// The `n`th retry waits `d = min(maxMs, baseMs · 2^(n−1))` scaled into `[d/2, d]` by a random
/// number in `[0, 1)` that the caller passes in ("equal jitter": never a thundering herd,
/// never less than half the backoff). Pure: the randomness and the clock are the caller's.
public struct WebhookRetryPolicy: Sendable, Equatable {
    /// The first retry's backoff (before jitter).
    public var baseMs: Int64
    /// The largest backoff (before jitter).
    public var maxMs: Int64
    /// Attempts in all (the first one included); `0` retries without end.
    public var maxAttempts: Int

    public init(baseMs: Int64, maxMs: Int64, maxAttempts: Int) {
        self.baseMs = max(1, baseMs)
        self.maxMs = max(self.baseMs, maxMs)
        self.maxAttempts = max(0, maxAttempts)
    }

    /// Whether another attempt follows `attempt` failed attempts.
    public func mayRetry(afterAttempt attempt: Int) -> Bool {
        maxAttempts == 0 || attempt < maxAttempts
    }

    /// The backoff before attempt `attempt + 1`, after `attempt` (≥ 1) failed ones; `random` in `[0, 1)`.
    public func delayMs(afterAttempt attempt: Int, random: Double) -> Int64 {
        let exponent = min(max(attempt - 1, 0), 40)
        let (scaled, overflow) = baseMs.multipliedReportingOverflow(by: Int64(1) << exponent)
        let d = overflow ? maxMs : min(maxMs, scaled)
        let r = random.isFinite ? min(max(random, 0), 1) : 0
        return d / 2 + Int64(Double(d - d / 2) * r)
    }
}
