import Foundation

/// A condition variable whose lock counts as held for `LockAudit`, like an `AuditedLock`: the
/// receipt writer's queue (taken by event loops to hand it receipts, by the writer thread to
/// take them, never across a commit) and the WAL checkpointer's timer. `NSCondition`'s calls,
/// with the counting around `lock` and `unlock`; a thread parked in `wait` still counts.
///
/// (`@unchecked Sendable`: `NSCondition` is thread-safe; the count is per thread.)
package final class AuditedCondition: @unchecked Sendable {
    private let condition = NSCondition()

    package init() {}

    package func lock() {
        condition.lock()
        assert(LockAudit.entered())
    }

    package func unlock() {
        assert(LockAudit.left())
        condition.unlock()
    }

    package func wait() { condition.wait() }
    package func wait(until deadline: Date) -> Bool { condition.wait(until: deadline) }
    package func signal() { condition.signal() }
    package func broadcast() { condition.broadcast() }
}
