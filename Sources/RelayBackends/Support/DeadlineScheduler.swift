import Atomics
import NIOConcurrencyHelpers
import NIOCore
import RelayLocks

/// Runs `action` on one event loop at the earliest deadline asked for; `action` returns the
/// next deadline (monotonic ms) or `nil`. Safe to call from any thread.
package final class DeadlineScheduler: Sendable {
    private struct State {
        var deadline: Int64?
        var task: Scheduled<Void>?
    }

    private let eventLoop: any EventLoop
    private let now: @Sendable () -> Int64
    private let state = AuditedLock(State())
    /// `state.deadline` (or `Int64.max`), readable without the lock: a typing change from any
    /// loop whose deadline is not earlier than the one already set returns without locking.
    /// Written only under the lock.
    private let scheduledAt = ManagedAtomic<Int64>(.max)
    private let action = CallbackSlot<@Sendable () -> Int64?>()

    package init(eventLoop: any EventLoop, now: @escaping @Sendable () -> Int64) {
        self.eventLoop = eventLoop
        self.now = now
    }

    package func setAction(_ action: @escaping @Sendable () -> Int64?) {
        self.action.set(action)
    }

    /// Makes sure the action runs no later than `deadline`.
    package func schedule(at deadline: Int64) {
        // The caller changed its state (under its own lock) before this read, and `fire` resets
        // `scheduledAt` before it reads that state: either this read sees the reset and takes
        // the lock below, or `fire`'s action sees the change.
        if scheduledAt.load(ordering: .sequentiallyConsistent) <= deadline { return }
        let delay = max(0, deadline - now())
        state.withLockedValue { state in
            if let current = state.deadline, current <= deadline { return }
            state.task?.cancel()
            state.deadline = deadline
            scheduledAt.store(deadline, ordering: .sequentiallyConsistent)
            state.task = eventLoop.scheduleTask(in: .milliseconds(delay)) { [self] in self.fire() }
        }
    }

    private func fire() {
        state.withLockedValue { state in
            state = State()
            scheduledAt.store(.max, ordering: .sequentiallyConsistent)
        }
        guard let action = action.value else { return }
        if let next = action() { schedule(at: next) }
    }

    package func cancel() {
        state.withLockedValue { state in
            state.task?.cancel()
            state = State()
            scheduledAt.store(.max, ordering: .sequentiallyConsistent)
        }
    }
}
