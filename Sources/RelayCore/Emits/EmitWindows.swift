/// The backend's emit windows (`"coalesce": {key, windowMs}` in the emit API): per key, the
/// first event opens a window of `windowMs`; later events of that key inside the window replace the
/// pending one (the window is not extended); when the window closes, the latest is sent. The
/// next event of the key opens a new window. So a key sends at most one event per window, and
/// no event waits longer than its window.
///
/// Pure logic: fed events and time (milliseconds on any monotonic clock), it says what to send
/// and when to come back (`nextDeadline`). Deadlines live in a binary heap, so an offer and a
/// flush cost O(log n) per window however many keys are pending. At most `maxPending` windows
/// are open at once; an event beyond that is not held (`.overflow`: send it now).
public struct EmitWindows<Key: Hashable & Sendable, Item: Sendable>: Sendable {
    public enum Outcome: Equatable, Sendable {
        /// The event opened a window: it is held until `deadline`.
        case opened(deadline: Int64)
        /// The event replaced the pending one of its open window (closing at `deadline`).
        case replaced(deadline: Int64)
        /// Too many windows are open: the event was not held; send it now.
        case overflow
    }

    struct Window: Sendable {
        var item: Item
        var deadline: Int64
        /// Events the pending one stands for (1 + the superseded ones).
        var count: Int
    }

    public let maxPending: Int
    private var windows: [Key: Window] = [:]
    /// (deadline, sequence, key): exactly one entry per open window, earliest first.
    private var heap: [(deadline: Int64, seq: UInt64, key: Key)] = []
    private var sequence: UInt64 = 0

    public init(maxPending: Int = 100_000) {
        self.maxPending = max(1, maxPending)
    }

    /// Windows open (events waiting).
    public var pendingCount: Int { windows.count }

    /// The earliest time `flush(now:)` has an event to send.
    public var nextDeadline: Int64? { heap.first?.deadline }

    /// The event waiting under `key`, if its window is open.
    public func pending(_ key: Key) -> Item? { windows[key]?.item }

    /// Offers an event of `key` at `now`; `windowMs` applies when it opens a window.
    public mutating func offer(_ item: Item, key: Key, windowMs: Int64, now: Int64) -> Outcome {
        if var window = windows[key] {
            window.item = item
            window.count += 1
            windows[key] = window
            return .replaced(deadline: window.deadline)
        }
        guard windows.count < maxPending else { return .overflow }
        let deadline = now + max(0, windowMs)
        windows[key] = Window(item: item, deadline: deadline, count: 1)
        sequence &+= 1
        push((deadline, sequence, key))
        return .opened(deadline: deadline)
    }

    /// Closes every window due at `now`; returns their latest events, earliest window first,
    /// with how many events each stands for.
    public mutating func flush(now: Int64) -> [(key: Key, item: Item, count: Int)] {
        var out: [(key: Key, item: Item, count: Int)] = []
        while let top = heap.first, top.deadline <= now {
            popFirst()
            if let window = windows.removeValue(forKey: top.key) { out.append((top.key, window.item, window.count)) }
        }
        return out
    }

    // MARK: Heap

    private static func less(_ a: (deadline: Int64, seq: UInt64, key: Key), _ b: (deadline: Int64, seq: UInt64, key: Key)) -> Bool {
        a.deadline != b.deadline ? a.deadline < b.deadline : a.seq < b.seq
    }

    private mutating func push(_ entry: (deadline: Int64, seq: UInt64, key: Key)) {
        heap.append(entry)
        var i = heap.count - 1
        while i > 0 {
            let parent = (i - 1) / 2
            guard Self.less(heap[i], heap[parent]) else { break }
            heap.swapAt(i, parent)
            i = parent
        }
    }

    private mutating func popFirst() {
        guard !heap.isEmpty else { return }
        heap.swapAt(0, heap.count - 1)
        heap.removeLast()
        var i = 0
        while true {
            let l = 2 * i + 1, r = l + 1
            var best = i
            if l < heap.count, Self.less(heap[l], heap[best]) { best = l }
            if r < heap.count, Self.less(heap[r], heap[best]) { best = r }
            guard best != i else { return }
            heap.swapAt(i, best)
            i = best
        }
    }
}
