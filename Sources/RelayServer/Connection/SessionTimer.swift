import NIOCore

/// A session's one timer, set for its `EngineSession`'s next deadline (heartbeat, pong,
/// CONNECT, upgrade, token expiry).
struct SessionTimer {
    private var scheduled: Scheduled<Void>?
    /// The deadline `scheduled` fires at (monotonic ms).
    private var deadline: Int64?

    /// Sets the timer for `deadline` (`nil`: none); a timer already set for it stays. `fire`
    /// runs on `loop` when it passes.
    mutating func set(for deadline: Int64?, now: @autoclosure () -> Int64, on loop: any EventLoop, fire: @escaping () -> Void) {
        guard let deadline else { return cancel() }
        if deadline == self.deadline { return }
        scheduled?.cancel()
        self.deadline = deadline
        scheduled = loop.assumeIsolated().scheduleTask(in: .milliseconds(max(0, deadline - now()))) { fire() }
    }

    /// The timer fired: the next `set` schedules again, whatever the deadline.
    mutating func fired() {
        deadline = nil
    }

    mutating func cancel() {
        scheduled?.cancel()
        scheduled = nil
        deadline = nil
    }
}
