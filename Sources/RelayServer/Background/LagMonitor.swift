import NIOConcurrencyHelpers
import NIOCore
import RelayLocks
import ServiceLifecycle

/// Measures, on every event loop, how late a 500 ms timer fires: a busy or blocked loop shows
/// in `relay_event_loop_lag_seconds`. Runs until the service group shuts down.
struct LagMonitor: Service {
    let loops: [any EventLoop]
    let metrics: RelayMetrics
    static let intervalNanoseconds: Int64 = 500_000_000

    func run() async throws {
        let interval = Self.intervalNanoseconds
        let tasks = loops.map { loop in
            let last = AuditedLock<UInt64>(NIODeadline.now().uptimeNanoseconds)
            return loop.scheduleRepeatedTask(initialDelay: .nanoseconds(interval), delay: .nanoseconds(interval)) { [metrics] _ in
                let now = NIODeadline.now().uptimeNanoseconds
                let previous = last.withLockedValue { old in defer { old = now }; return old }
                metrics.eventLoopLag.recordNanoseconds(max(0, Int64(now &- previous) - interval))
            }
        }
        try? await gracefulShutdown()
        for task in tasks { task.cancel() }
    }
}
