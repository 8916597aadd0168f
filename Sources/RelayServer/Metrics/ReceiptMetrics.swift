import CoreMetrics

/// Durable receipts: commits, their batches, and refusals by quota.
public struct ReceiptMetrics: Sendable {
    let quotaRefusals: Counter
    let commit: Timer
    let batch: Recorder
    let stored: Counter

    init(_ r: PrometheusRegistry) {
        r.describe("relay_receipt_quota_refusals_total", "Receipts refused because the user's or the connection's receipt quota was spent")
        r.describe("relay_receipt_commit_seconds", "Time to commit one batch of receipts")
        r.describe("relay_receipt_batch_size", "Receipts per committed transaction", buckets: [1, 2, 5, 10, 25, 50, 100, 250, 500, 1000, 2500])
        r.describe("relay_receipts_stored_total", "Receipts committed (new ones)")
        quotaRefusals = Counter(label: "relay_receipt_quota_refusals_total", factory: r)
        commit = Timer(label: "relay_receipt_commit_seconds", factory: r)
        batch = Recorder(label: "relay_receipt_batch_size", aggregate: true, factory: r)
        stored = Counter(label: "relay_receipts_stored_total", factory: r)
    }
}
