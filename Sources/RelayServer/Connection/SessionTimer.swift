import NIOCore
import RelayCore

/// What a `SessionTimer` calls when the callback it set last fires.
protocol SessionTimerOwner: AnyObject {
    /// The timer set with `generation` fired; ask `SessionTimer.fired(_:)` whether it is the
    /// current one.
    func sessionTimerFired(generation: UInt32)
}

/// A session's one timer, set for its `EngineSession`'s next deadline (heartbeat, pong,
/// CONNECT, upgrade, token expiry).
///
/// A scheduled callback, not a scheduled task: NIO's `scheduleTask` allocates a promise and
/// three closure contexts per timer (about 300 bytes with the allocator's overhead, for every
/// idle socket), a callback only its entry in the loop's timer queue. The handler (the owner
/// and a generation, inline in the queue's entry) holds the owner until it fires or is
/// cancelled.
///
/// Each callback carries the generation it was set with, because a cancelled one can still
/// fire: NIO takes every due timer out of its queue before running the batch, so a timer that
/// came due in the same tick as a task that re-arms it (a token verified just as the CONNECT
/// deadline passed) is no longer there to cancel. Such a late callback is ignored; taking it
/// for the current one used to forget the timer set after it, which then held its session for
/// up to a heartbeat after the session ended.
struct SessionTimer {
    private var scheduled: NIOScheduledCallback?
    /// The deadline `scheduled` fires at (monotonic ms).
    @PackedDeadline private var deadline: Int64? = nil
    /// Changes with every timer set or cancelled; the callback set last carries the current one.
    private(set) var generation: UInt32 = 0

    /// Sets the timer for `deadline` (`nil`: none); a timer already set for it stays. `owner`
    /// is told on `loop` when it passes (nothing is scheduled on a loop that is shutting down).
    mutating func set<Owner: SessionTimerOwner>(for deadline: Int64?, now: @autoclosure () -> Int64, on loop: any EventLoop, owner: Owner) {
        guard let deadline else { return cancel() }
        if deadline == self.deadline, scheduled != nil { return }
        scheduled?.cancel()
        generation &+= 1
        self.deadline = deadline
        let fire = Fire(owner: owner, generation: generation)
        scheduled = try? loop.assumeIsolated().scheduleCallback(in: .milliseconds(max(0, deadline - now())), handler: fire)
    }

    /// A callback set with `generation` fired: `true` when it is the timer set last (the next
    /// `set` then schedules again, whatever the deadline); `false` for one cancelled or replaced
    /// after NIO had already taken it out of its queue, which changes nothing.
    mutating func fired(_ generation: UInt32) -> Bool {
        guard generation == self.generation, scheduled != nil else { return false }
        scheduled = nil
        deadline = nil
        return true
    }

    mutating func cancel() {
        scheduled?.cancel()
        scheduled = nil
        deadline = nil
        generation &+= 1
    }

    /// The handler in the loop's queue: the owner and the generation, inline in the entry's
    /// existential (no allocation).
    private struct Fire<Owner: SessionTimerOwner>: NIOScheduledCallbackHandler {
        let owner: Owner
        let generation: UInt32

        func handleScheduledCallback(eventLoop: some EventLoop) {
            owner.sessionTimerFired(generation: generation)
        }
    }
}
