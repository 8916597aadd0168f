import RelayLocks

/// A callback set once (before the component starts) and read on every call, behind a lock.
///
/// Not a `NIOLockedValueBox<(…) -> …?>`: reading a function-typed value with the box's generic
/// `withLockedValue { $0 }` reabstracts the closure through the `inout` and writes the wrapped
/// closure back — one more thunk per read — until a call recurses through tens of thousands of
/// thunks and overflows the event loop's stack. (That crashed both nodes of the soak every
/// ~40 000 cross-node messages, with SIGSEGV and no backtrace; a core dump showed 130 000
/// thunk frames under `RedisBroker.received`.) Held in a struct, the function keeps the
/// representation it was stored with: a read adds nothing.
package final class CallbackSlot<Function: Sendable>: Sendable {
    private struct Slot: Sendable {
        var function: Function?
    }

    /// Audited like every shared lock: a socket write under it would be caught in debug builds.
    private let box = AuditedLock(Slot())

    package init() {}

    package func set(_ function: Function) {
        box.withLockedValue { $0.function = function }
    }

    package var value: Function? {
        box.withLockedValue { $0.function }
    }
}
