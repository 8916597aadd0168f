import NIOConcurrencyHelpers

/// The deliveries handed to one loop partition from any thread, kept in the order they were posted.
///
/// It lets the partition run one `EventLoop.execute` per batch instead of one per delivery: a poster
/// appends under a short lock, and only the first poster of a batch has the drain scheduled.
/// The order matters: the memory broker posts a stream's stamped events under the stream's
/// lock, so every socket gets a stream's events in offset order, which recovery relies on.
/// Appending never runs a delivery, so it is safe with other locks held.
struct PartitionInbox: Sendable {
    private var items: [PartitionDelivery] = []
    private var drainScheduled = false

    /// Appends a delivery; `true` when the caller must schedule the drain (none is pending).
    mutating func append(_ delivery: PartitionDelivery) -> Bool {
        items.append(delivery)
        if drainScheduled { return false }
        drainScheduled = true
        return true
    }

    /// Takes every delivery posted so far into `batch` (an empty buffer the drainer keeps, so
    /// neither side allocates per batch once both have grown); the next append schedules anew.
    mutating func take(into batch: inout [PartitionDelivery]) {
        drainScheduled = false
        swap(&items, &batch)
    }

    /// Deliveries waiting.
    var count: Int { items.count }
}
