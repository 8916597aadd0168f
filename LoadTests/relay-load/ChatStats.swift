import Histogram

/// Counters of one event loop's share of the `chat` scenario. Loop-confined (touched only on
/// its loop), merged at the end.
///
/// Arrivals (`*Deliveries`) count what arrived inside the measured window, the window the
/// server's CPU is read over. Sends, acks and latencies count what was *sent* inside the
/// window, whenever its answer arrived (until the drain after it).
final class ChatStats {
    /// Every event received, ever (the setup's settling watches it).
    var events = 0

    // Arrivals inside the window.
    var chatDeliveries = 0
    var typingDeliveries = 0
    var receiptDeliveries = 0
    var presenceDeliveries = 0
    var otherDeliveries = 0

    // Sent inside the window, and what became of it.
    var messagesSent = 0
    /// Messages of the window received (by their send stamp), whenever they arrived.
    var messagesReceived = 0
    var messagesSkippedOffline = 0
    var messageAcks = 0
    var typingSent = 0
    var receiptBatchesSent = 0
    var receiptItemsSent = 0
    var receiptBatchesAcked = 0
    var receiptItemsAcked = 0
    var receiptsSkippedOffline = 0
    /// Acks asked inside the window on sockets the churn closed before the answer came.
    var acksLostToChurn = 0
    var latency = Histogram<UInt64>(highestTrackableValue: 60_000_000)  // µs, send → arrival
    var messageAck = Histogram<UInt64>(highestTrackableValue: 60_000_000)  // µs
    var receiptAck = Histogram<UInt64>(highestTrackableValue: 60_000_000)  // µs, only after commit on Relay
    /// Chat messages sent inside the window: (send time, room, sending socket).
    var sends: [(t: UInt64, room: Int32, socket: Int32)] = []

    // Churn started inside the window.
    var reconnectsStarted = 0
    var reconnectsDone = 0
    var reconnectFailures = 0
    var reconnectTime = Histogram<UInt64>(highestTrackableValue: 60_000_000)  // µs, TCP connect → CONNECT answer

    // Errors, whenever they happened (setup included).
    var ackErrors: [String: Int] = [:]
    var errors: [String: Int] = [:]
    var closes: [UInt16: Int] = [:]

    init() {
        for h in [\ChatStats.latency, \.messageAck, \.receiptAck, \.reconnectTime] { self[keyPath: h].autoResize = true }
    }

    func merge(_ o: ChatStats) {
        events += o.events
        chatDeliveries += o.chatDeliveries
        typingDeliveries += o.typingDeliveries
        receiptDeliveries += o.receiptDeliveries
        presenceDeliveries += o.presenceDeliveries
        otherDeliveries += o.otherDeliveries
        messagesSent += o.messagesSent
        messagesReceived += o.messagesReceived
        messagesSkippedOffline += o.messagesSkippedOffline
        messageAcks += o.messageAcks
        typingSent += o.typingSent
        receiptBatchesSent += o.receiptBatchesSent
        receiptItemsSent += o.receiptItemsSent
        receiptBatchesAcked += o.receiptBatchesAcked
        receiptItemsAcked += o.receiptItemsAcked
        receiptsSkippedOffline += o.receiptsSkippedOffline
        acksLostToChurn += o.acksLostToChurn
        latency.add(o.latency)
        messageAck.add(o.messageAck)
        receiptAck.add(o.receiptAck)
        sends += o.sends
        reconnectsStarted += o.reconnectsStarted
        reconnectsDone += o.reconnectsDone
        reconnectFailures += o.reconnectFailures
        reconnectTime.add(o.reconnectTime)
        for (k, v) in o.ackErrors { ackErrors[k, default: 0] += v }
        for (k, v) in o.errors { errors[k, default: 0] += v }
        for (k, v) in o.closes { closes[k, default: 0] += v }
    }

    /// Every event that arrived in the window.
    var deliveries: Int { chatDeliveries + typingDeliveries + receiptDeliveries + presenceDeliveries + otherDeliveries }
}
