import NIOCore
import RelayCore

/// How a backend emit asks to be coalesced: per `key`, at most one event per `windowMs` reaches
/// each recipient, the latest (PROTOCOL §5).
public struct CoalesceRule: Sendable, Equatable {
    public var key: String
    public var windowMs: Int64

    public static let windowRange: ClosedRange<Int64> = 10...60_000
    public static let maxKeyBytes = 128

    public init(key: String, windowMs: Int64) {
        self.key = key
        self.windowMs = windowMs
    }
}

/// One coalescing window: a key on one stream (room or user) of this node.
struct CoalesceSlot: Hashable, Sendable {
    var stream: StreamKey
    var key: String
}

/// The latest event of a window and how to deliver it.
struct PendingEmit: Sendable {
    var message: OutboundMessage
    var routing: Routing
}

/// Coalesced backend emits, on the node that delivers them: every node that has recipients of
/// the stream gets every emit through the broker (its own and the other nodes'), holds the
/// latest per (stream, key) until the window closes, then delivers it to the sockets the
/// stream has on this node at that moment. So a recipient gets at most one event per key and
/// window, whichever nodes the backend called.
extension Hub {
    /// Holds an event of a coalesced emit (or delivers it at once when too many windows are open).
    func offerCoalesced(_ stream: StreamKey, _ message: OutboundMessage, routing: Routing, rule: CoalesceRule) {
        let now = clock.monotonicMs()
        let slot = CoalesceSlot(stream: stream, key: rule.key)
        let outcome = coalescing.withLockedValue { $0.offer(PendingEmit(message: message, routing: routing), key: slot, windowMs: rule.windowMs, now: now) }
        switch outcome {
        case .opened(let deadline):
            coalesceTimer.schedule(at: deadline)
        case .replaced:
            break
        case .overflow:
            deliverCoalesced(stream, PendingEmit(message: message, routing: routing))
        }
    }

    /// Timer callback: delivers the windows that closed; returns the next deadline.
    func flushCoalesced() -> Int64? {
        let now = clock.monotonicMs()
        let (due, next) = coalescing.withLockedValue { c in (c.flush(now: now), c.nextDeadline) }
        for window in due {
            if window.count > 1 { metrics.emitsSuperseded.increment(by: Int64(window.count - 1)) }
            deliverCoalesced(window.key.stream, window.item)
        }
        return next
    }

    /// Delivers to the stream's sockets on this node now, as an event from another node is.
    private func deliverCoalesced(_ stream: StreamKey, _ pending: PendingEmit) {
        var routing = pending.routing
        routing.coalesce = nil
        deliverFromCluster(stream, pending.message, routing: routing)
    }
}
