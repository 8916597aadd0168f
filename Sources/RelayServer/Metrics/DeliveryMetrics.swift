import CoreMetrics

/// Fan-out: deliveries, what backpressure replaced or dropped, slow consumers, latency, rooms
/// and the history this node keeps.
public struct DeliveryMetrics: Sendable {
    let deliveries: Counter
    let coalesced: Counter
    let dropped: Counter
    let slowConsumerCloses: Counter
    let fanoutLatency: Timer
    /// Coalesced backend emits replaced by a later one within their window (never sent).
    let emitsSuperseded: Counter
    let rooms: Meter
    /// This node's memory history (events, bytes), set at each scrape.
    let historyEvents: Meter
    let historyBytes: Meter

    init(_ r: PrometheusRegistry) {
        r.describe("relay_deliveries_total", "Messages handed to sockets by fan-out")
        r.describe("relay_coalesced_total", "Queued events replaced by a newer one with the same key (backpressure)")
        r.describe("relay_dropped_total", "Queued events discarded because their connection closed")
        r.describe("relay_slow_consumer_closes_total", "Connections closed with 4008 because their outbound queue passed its hard limit")
        r.describe("relay_fanout_seconds", "From an event's publication to its write on a recipient loop")
        r.describe("relay_emits_superseded_total", "Coalesced backend emits replaced by a later one of the same key within the window")
        r.describe("relay_rooms", "Rooms with at least one member")
        deliveries = Counter(label: "relay_deliveries_total", factory: r)
        coalesced = Counter(label: "relay_coalesced_total", factory: r)
        dropped = Counter(label: "relay_dropped_total", factory: r)
        slowConsumerCloses = Counter(label: "relay_slow_consumer_closes_total", factory: r)
        fanoutLatency = Timer(label: "relay_fanout_seconds", factory: r)
        emitsSuperseded = Counter(label: "relay_emits_superseded_total", factory: r)
        rooms = Meter(label: "relay_rooms", factory: r)
        historyEvents = Meter(label: "relay_history_events", factory: r)
        historyBytes = Meter(label: "relay_history_bytes", factory: r)
    }
}
