import NIOCore
import RelayCore

/// A session's one timer, set for its `EngineSession`'s next deadline (heartbeat, pong,
/// CONNECT, upgrade, token expiry).
///
/// A scheduled callback, not a scheduled task: NIO's `scheduleTask` allocates a promise and
/// three closure contexts per timer (about 300 bytes with the allocator's overhead, for every
/// idle socket), a callback only its entry in the loop's timer queue. The handler (the session)
/// is held by the loop until the timer fires or is cancelled.
struct SessionTimer {
    private var scheduled: NIOScheduledCallback?
    /// The deadline `scheduled` fires at (monotonic ms).
    @PackedDeadline private var deadline: Int64? = nil

    /// Sets the timer for `deadline` (`nil`: none); a timer already set for it stays. `handler`
    /// is called on `loop` when it passes (nothing is scheduled on a loop that is shutting down).
    mutating func set(for deadline: Int64?, now: @autoclosure () -> Int64, on loop: any EventLoop, handler: some NIOScheduledCallbackHandler) {
        guard let deadline else { return cancel() }
        if deadline == self.deadline { return }
        scheduled?.cancel()
        self.deadline = deadline
        scheduled = try? loop.assumeIsolated().scheduleCallback(in: .milliseconds(max(0, deadline - now())), handler: handler)
    }

    /// The timer fired: the next `set` schedules again, whatever the deadline.
    mutating func fired() {
        scheduled = nil
        deadline = nil
    }

    mutating func cancel() {
        scheduled?.cancel()
        scheduled = nil
        deadline = nil
    }
}
