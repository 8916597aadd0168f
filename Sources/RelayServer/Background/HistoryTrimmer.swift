import NIOCore
import RelayBackends
import ServiceLifecycle

/// Quiet rooms' memory history expires too, not only when something is appended next to it:
/// every quarter of the history's age limit (1–10 s), the memory broker drops what is past it.
/// (Redis trims its streams itself.) Runs until the service group shuts down.
struct HistoryTrimmer: Service {
    let broker: MemoryBroker
    let loop: any EventLoop

    var interval: TimeAmount { .milliseconds(max(1_000, min(broker.limits.maxAgeMs / 4, 10_000))) }

    /// Returns only at shutdown, history or not: a service that returns ends its group.
    func run() async throws {
        var task: RepeatedTask?
        if broker.limits.isEnabled {
            let every = interval
            task = loop.scheduleRepeatedTask(initialDelay: every, delay: every) { [broker] _ in broker.trimExpired() }
        }
        try? await gracefulShutdown()
        task?.cancel()
    }
}
