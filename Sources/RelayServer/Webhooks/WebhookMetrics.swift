import CoreMetrics

/// The webhook metrics, created once on the relay's registry (docs/PROTOCOL.md §11, §13).
final class WebhookMetrics: Sendable {
    /// Batches delivered (2xx) and the events in them.
    let deliveries: Counter
    let eventsDelivered: Counter
    /// Failed attempts that will be tried again.
    let retries: Counter
    /// Events dropped: the queue was full, or their batch ran out of attempts.
    let droppedQueueFull: Counter
    let droppedGaveUp: Counter
    /// Events waiting or in flight, all URLs together.
    let queueDepth: Meter
    /// From a batch's oldest event entering the queue to the 2xx.
    let batchLatency: Timer

    init(registry: PrometheusRegistry) {
        let r = registry
        r.describe("relay_webhook_deliveries_total", "Webhook requests answered 2xx (batches)")
        r.describe("relay_webhook_events_delivered_total", "Webhook events in batches answered 2xx")
        r.describe("relay_webhook_retries_total", "Webhook requests that failed (non-2xx, timeout, refused) and will be retried")
        r.describe("relay_webhook_dropped_total", "Webhook events dropped: queue full, or their batch ran out of attempts")
        r.describe("relay_webhook_queue_depth", "Webhook events waiting or in flight, all URLs")
        r.describe("relay_webhook_batch_seconds", "From a webhook batch's oldest event entering the queue to its 2xx")
        deliveries = Counter(label: "relay_webhook_deliveries_total", factory: r)
        eventsDelivered = Counter(label: "relay_webhook_events_delivered_total", factory: r)
        retries = Counter(label: "relay_webhook_retries_total", factory: r)
        droppedQueueFull = Counter(label: "relay_webhook_dropped_total", dimensions: [("reason", "queue_full")], factory: r)
        droppedGaveUp = Counter(label: "relay_webhook_dropped_total", dimensions: [("reason", "gave_up")], factory: r)
        queueDepth = Meter(label: "relay_webhook_queue_depth", factory: r)
        batchLatency = Timer(label: "relay_webhook_batch_seconds", factory: r)
    }
}
