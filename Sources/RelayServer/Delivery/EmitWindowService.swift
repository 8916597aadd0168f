import NIOConcurrencyHelpers
import NIOCore
import RelayBackends
import RelayCore
import RelayLocks

/// One emit window: a key on one stream (room or user) of this node.
struct EmitWindowSlot: Hashable, Sendable {
    var stream: StreamKey
    var key: String
}

/// The latest event of a window and how to deliver it.
struct PendingEmit: Sendable {
    var message: OutboundMessage
    var routing: Routing
}

/// The backend's emit windows on the node that delivers them: every node that has recipients
/// of the stream gets every emit through the broker (its own and the other nodes'), holds the
/// latest per (stream, key) until the window closes, then delivers it to the sockets the stream
/// has on this node at that moment. So a recipient gets at most one event per key and window,
/// whichever nodes the backend called. Its own lock and its own timer.
final class EmitWindowService: Sendable {
    private let windows = AuditedLock(EmitWindows<EmitWindowSlot, PendingEmit>())
    private let timer: DeadlineScheduler
    private let clock: RelayClock
    private let metrics: RelayMetrics
    /// Delivers a held event to this node's sockets of its stream (the publisher's
    /// `deliverHere`). Set once, when the node is assembled.
    private let deliver = CallbackSlot<@Sendable (StreamKey, OutboundMessage, Routing) -> Void>()

    init(timerLoop: any EventLoop, clock: RelayClock, metrics: RelayMetrics) {
        self.clock = clock
        self.metrics = metrics
        self.timer = DeadlineScheduler(eventLoop: timerLoop, now: clock.monotonicMs)
        timer.setAction { [weak self] in self?.closeDueWindows() }
    }

    func setDeliver(_ deliver: @escaping @Sendable (StreamKey, OutboundMessage, Routing) -> Void) {
        self.deliver.set(deliver)
    }

    /// Holds an event of an emit with a window (or delivers it at once when too many windows are open).
    func hold(_ stream: StreamKey, _ message: OutboundMessage, routing: Routing, window: EmitWindow) {
        let now = clock.monotonicMs()
        let slot = EmitWindowSlot(stream: stream, key: window.key)
        let pending = PendingEmit(message: message, routing: routing)
        switch windows.withLockedValue({ $0.offer(pending, key: slot, windowMs: window.windowMs, now: now) }) {
        case .opened(let deadline): timer.schedule(at: deadline)
        case .replaced: break
        case .overflow: deliverNow(stream, pending)
        }
    }

    /// Timer callback: delivers the windows that closed; returns the next deadline.
    private func closeDueWindows() -> Int64? {
        let now = clock.monotonicMs()
        let (due, next) = windows.withLockedValue { w in (w.flush(now: now), w.nextDeadline) }
        for window in due {
            if window.count > 1 { metrics.delivery.emitsSuperseded.increment(by: Int64(window.count - 1)) }
            deliverNow(window.key.stream, window.item)
        }
        return next
    }

    private func deliverNow(_ stream: StreamKey, _ pending: PendingEmit) {
        var routing = pending.routing
        routing.window = nil
        deliver.value?(stream, pending.message, routing)
    }

    func cancel() { timer.cancel() }
}
