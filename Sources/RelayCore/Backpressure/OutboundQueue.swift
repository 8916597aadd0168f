/// A connection's bounded outbound queue: what waits while the socket is not writable.
///
/// Bounded in bytes and in count. Over the soft byte limit, a coalescible message replaces the
/// queued message with the same key (latest wins, keeping the older one's place in line); over
/// the hard limit — or the count limit — `enqueue` reports `.overflow` and the caller closes the
/// connection, so a slow reader cannot grow the relay's memory or slow the others.
public struct OutboundQueue<Element>: Sendable where Element: Sendable {
    public enum EnqueueResult: Equatable, Sendable {
        case queued
        /// An older message with the same key was replaced.
        case replaced
        /// Over the hard limit: nothing was queued; close the connection.
        case overflow
    }

    struct Slot: Sendable {
        var element: Element
        var bytes: Int
        var key: CoalescingKey?
    }

    public let softLimitBytes: Int
    public let hardLimitBytes: Int
    public let maxCount: Int
    private var slots: [Slot?] = []
    private var head = 0
    /// Absolute position (`dequeued + offset`) of the queued message for each key.
    private var positions: [CoalescingKey: Int] = [:]
    private var dequeued = 0
    public private(set) var queuedBytes = 0
    public private(set) var count = 0

    public init(softLimitBytes: Int, hardLimitBytes: Int, maxCount: Int) {
        self.softLimitBytes = softLimitBytes
        self.hardLimitBytes = hardLimitBytes
        self.maxCount = maxCount
    }

    public var isEmpty: Bool { count == 0 }

    public mutating func enqueue(_ element: Element, bytes: Int, key: CoalescingKey? = nil) -> EnqueueResult {
        if let key, queuedBytes + bytes > softLimitBytes, let position = positions[key] {
            let index = position - dequeued + head
            if index >= head, index < slots.count, let old = slots[index] {
                let newBytes = queuedBytes - old.bytes + bytes
                guard newBytes <= hardLimitBytes else { return .overflow }
                slots[index] = Slot(element: element, bytes: bytes, key: key)
                queuedBytes = newBytes
                return .replaced
            }
        }
        guard queuedBytes + bytes <= hardLimitBytes, count < maxCount else { return .overflow }
        if let key { positions[key] = dequeued + (slots.count - head) }
        slots.append(Slot(element: element, bytes: bytes, key: key))
        queuedBytes += bytes
        count += 1
        return .queued
    }

    public mutating func dequeue() -> Element? {
        guard head < slots.count, let slot = slots[head] else { return nil }
        slots[head] = nil
        head += 1
        if let key = slot.key, positions[key] == dequeued { positions.removeValue(forKey: key) }
        dequeued += 1
        queuedBytes -= slot.bytes
        count -= 1
        if head == slots.count {
            slots.removeAll(keepingCapacity: true)
            head = 0
        } else if head > 64, head * 2 > slots.count {
            slots.removeFirst(head)
            head = 0
        }
        return slot.element
    }

    /// Drops everything (the connection is closing).
    public mutating func removeAll() {
        slots.removeAll()
        positions.removeAll()
        head = 0
        queuedBytes = 0
        count = 0
    }
}
