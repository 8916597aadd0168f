import CoreMetrics
import RelayCluster
import RelayCore

/// Every metric Relay exports, created once (label sets are bounded: known event names plus
/// `custom` and `invalid`, known reasons and codes), so recording is a dictionary read and an
/// atomic add — never a lock. Grouped by what they watch; each group describes and creates its
/// own series.
public final class RelayMetrics: Sendable {
    public let registry: PrometheusRegistry
    let connections: ConnectionMetrics
    let events: EventMetrics
    let delivery: DeliveryMetrics
    let receipts: ReceiptMetrics
    /// The Redis side's metrics.
    public let cluster: ClusterMetrics
    let eventLoopLag: Timer
    /// Heap trims after connection churn (`HeapTrimmer`).
    let heapTrims: Counter

    public init(registry: PrometheusRegistry = PrometheusRegistry()) {
        self.registry = registry
        let r = registry
        connections = ConnectionMetrics(r)
        events = EventMetrics(r)
        delivery = DeliveryMetrics(r)
        receipts = ReceiptMetrics(r)
        r.describe("relay_redis_link_up", "1 when the Redis link is up (0 when configured and down)")
        r.describe("relay_redis_degraded_total", "Events delivered node-locally because Redis was down")
        cluster = ClusterMetrics(linkUp: Meter(label: "relay_redis_link_up", factory: r), degraded: Counter(label: "relay_redis_degraded_total", factory: r))
        r.describe("relay_event_loop_lag_seconds", "How late a 500 ms timer fires on each event loop")
        eventLoopLag = Timer(label: "relay_event_loop_lag_seconds", factory: r)
        heapTrims = Counter(label: "relay_heap_trims_total", factory: r)
    }

    // MARK: Reading back (admin stats, dashboard)

    func counterValue(_ label: String, _ dimensions: [(String, String)] = []) -> Int64 {
        (registry.series(label, dimensions) as? AtomicCounter)?.value ?? 0
    }

    func counterSum(_ label: String, dimension: String, values: [String]) -> Int64 {
        values.reduce(0) { $0 + counterValue(label, [(dimension, $1)]) }
    }

    var eventsInTotal: Int64 { counterSum("relay_events_in_total", dimension: "event", values: events.inLabels) }
    var eventsOutTotal: Int64 { counterSum("relay_events_out_total", dimension: "event", values: events.outLabels) }

    func histogram(_ label: String) -> AtomicHistogram? { registry.series(label) as? AtomicHistogram }
}
