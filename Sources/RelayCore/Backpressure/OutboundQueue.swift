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
    /// What is queued; `nil` while nothing is (every socket has a queue, few ever use it: 8
    /// bytes each instead of 48).
    private var storage: Storage?

    public init(softLimitBytes: Int, hardLimitBytes: Int, maxCount: Int) {
        self.softLimitBytes = softLimitBytes
        self.hardLimitBytes = hardLimitBytes
        self.maxCount = maxCount
    }

    public var isEmpty: Bool { storage == nil }
    public var count: Int { storage?.count ?? 0 }
    public var queuedBytes: Int { storage?.queuedBytes ?? 0 }

    public mutating func enqueue(_ element: Element, bytes: Int, key: CoalescingKey? = nil) -> EnqueueResult {
        let queuedBytes = self.queuedBytes
        if let key, queuedBytes + bytes > softLimitBytes, let queued = slot(of: key) {
            let newBytes = queuedBytes - queued.bytes + bytes
            guard newBytes <= hardLimitBytes else { return .overflow }
            let s = unique()
            s.slots[queued.index] = Slot(element: element, bytes: bytes, key: key)
            s.queuedBytes = newBytes
            return .replaced
        }
        guard queuedBytes + bytes <= hardLimitBytes, count < maxCount else { return .overflow }
        let s = unique()
        if let key { s.positions[key] = s.dequeued + (s.slots.count - s.head) }
        s.slots.append(Slot(element: element, bytes: bytes, key: key))
        s.queuedBytes += bytes
        s.count += 1
        return .queued
    }

    public mutating func dequeue() -> Element? {
        guard storage != nil else { return nil }
        let s = unique()
        guard s.head < s.slots.count, let slot = s.slots[s.head] else { return nil }
        s.slots[s.head] = nil
        s.head += 1
        if let key = slot.key, s.positions[key] == s.dequeued { s.positions.removeValue(forKey: key) }
        s.dequeued += 1
        s.queuedBytes -= slot.bytes
        s.count -= 1
        if s.count == 0 {
            storage = nil
        } else if s.head > 64, s.head * 2 > s.slots.count {
            s.slots.removeFirst(s.head)
            s.head = 0
        }
        return slot.element
    }

    /// Drops everything (the connection is closing).
    public mutating func removeAll() {
        storage = nil
    }

    /// Where the queued message with `key` is, and its bytes.
    private func slot(of key: CoalescingKey) -> (index: Int, bytes: Int)? {
        guard let s = storage, let position = s.positions[key] else { return nil }
        let index = position - s.dequeued + s.head
        guard index >= s.head, index < s.slots.count, let old = s.slots[index] else { return nil }
        return (index, old.bytes)
    }

    /// The storage, made if there is none, copied first if another queue shares it.
    private mutating func unique() -> Storage {
        if isKnownUniquelyReferenced(&storage), let current = storage { return current }
        let s = storage.map(Storage.init(copying:)) ?? Storage()
        storage = s
        return s
    }
}

extension OutboundQueue {
    /// The queued messages and their bookkeeping.
    ///
    /// (`@unchecked Sendable`: copy-on-write — it is written only through `unique()`, which
    /// copies it first unless the queue writing is its only owner, so a storage two queues share
    /// is never written.)
    final class Storage: @unchecked Sendable {
        var slots: [Slot?] = []
        var head = 0
        /// Absolute position (`dequeued + offset`) of the queued message for each key.
        var positions: [CoalescingKey: Int] = [:]
        var dequeued = 0
        var queuedBytes = 0
        var count = 0

        init() {}

        init(copying other: Storage) {
            slots = other.slots
            head = other.head
            positions = other.positions
            dequeued = other.dequeued
            queuedBytes = other.queuedBytes
            count = other.count
        }
    }
}
