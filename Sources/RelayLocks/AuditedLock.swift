import NIOConcurrencyHelpers
import NIOPosix

/// A value behind a lock, for the state the node shares across event loops. In debug builds it
/// also counts the audited locks the current thread holds, so the places that write to a socket
/// can assert that none is held (`LockAudit.noneHeld`): "no lock held across I/O" is checked by
/// every test that runs the debug build, not only written down. Release builds compile the
/// counting out (it lives in `assert`).
package final class AuditedLock<Value> {
    private let lock = NIOLock()
    private var value: Value

    package init(_ value: Value) {
        self.value = value
    }

    package func withLockedValue<T>(_ body: (inout Value) throws -> T) rethrows -> T {
        try withLock(body)
    }

    /// `withLockedValue` for closures with a typed error.
    package func withLock<T, E: Error>(_ body: (inout Value) throws(E) -> T) throws(E) -> T {
        lock.lock()
        assert(LockAudit.entered())
        defer {
            assert(LockAudit.left())
            lock.unlock()
        }
        return try body(&value)
    }
}

/// (`@unchecked Sendable`: `value` is only read or written inside `lock`; like NIO's locked box,
/// it is Sendable when its value is.)
extension AuditedLock: @unchecked Sendable where Value: Sendable {}

/// How many `AuditedLock`s the current thread holds (debug builds only).
package enum LockAudit {
    /// One per thread. (`@unchecked Sendable`: only the thread it belongs to touches it.)
    private final class Depth: @unchecked Sendable {
        var count = 0
    }

    private static let depth = ThreadSpecificVariable<Depth>()

    private static var current: Depth {
        if let d = depth.currentValue { return d }
        let d = Depth()
        depth.currentValue = d
        return d
    }

    package static func entered() -> Bool {
        current.count += 1
        return true
    }

    package static func left() -> Bool {
        current.count -= 1
        return true
    }

    /// For `assert`: whether this thread holds no audited lock (call it where bytes go to a
    /// socket: a write there under a lock would hold every thread that wants it for the write).
    package static func noneHeld() -> Bool {
        depth.currentValue.map { $0.count == 0 } ?? true
    }
}
