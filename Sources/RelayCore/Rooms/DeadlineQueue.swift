/// Items whose deadlines come in order (one window length for all, a monotonic clock): a
/// queue, not a heap. Taken from the front as they come due; the array is compacted in batches,
/// not shifted one item at a time.
public struct DeadlineQueue<Element: Sendable>: Sendable {
    private var items: [(until: Int64, element: Element)] = []
    private var head = 0

    public init() {}

    public var count: Int { items.count - head }

    /// What is queued, earliest first.
    public var pending: ArraySlice<(until: Int64, element: Element)> { items[head...] }

    /// The last deadline queued.
    public var lastDeadline: Int64? { head < items.count ? items.last?.until : nil }

    public mutating func append(_ element: Element, until: Int64) {
        items.append((until, element))
    }

    /// Takes the items due at `now`, earliest first.
    public mutating func popDue(now: Int64) -> [(until: Int64, element: Element)] {
        var out: [(until: Int64, element: Element)] = []
        while head < items.count, items[head].until <= now {
            out.append(items[head])
            head += 1
        }
        if head == items.count {
            items.removeAll(keepingCapacity: items.count <= 1024)
            head = 0
        } else if head >= 1024 && head * 2 >= items.count {
            items.removeFirst(head)
            head = 0
        }
        return out
    }

    /// Takes everything, due or not.
    public mutating func popAll() -> [(until: Int64, element: Element)] {
        defer {
            items = []
            head = 0
        }
        return Array(items[head...])
    }
}
