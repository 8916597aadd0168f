/// The retained events of one stream, oldest first, and where the stream stands.
///
/// A read after offset `o` is answered only when every event after `o` is still here: `o` is a
/// retained event, the newest event evicted, the stream's head, or the start of a stream that
/// never lost anything. An offset the stream never had (from before a restart, another
/// incarnation of the stream, or made up) is `unavailable`, never a partial answer.
public struct StreamHistory<Item> {
    public struct Entry {
        public var offset: StreamOffset
        public var wallMs: Int64
        public var bytes: Int
        public var item: Item
    }

    private var queue = FIFO<Entry>()
    /// The retained events, oldest first.
    public var entries: ArraySlice<Entry> { queue.elements }
    /// The newest offset this stream gave out (`zero` when none).
    public private(set) var head = StreamOffset.zero
    /// The newest evicted offset, once anything was evicted.
    public private(set) var lastEvicted: StreamOffset?
    public private(set) var bytes = 0

    public init() {}

    /// Appends an event at the next offset.
    public mutating func append(_ item: Item, bytes: Int, wallMs: Int64) -> StreamOffset {
        let offset = head.next(wallMs: wallMs)
        queue.append(Entry(offset: offset, wallMs: wallMs, bytes: bytes, item: item))
        head = offset
        self.bytes += bytes
        return offset
    }

    /// Appends an event, then evicts the oldest past `maxEvents` or past `maxBytes` (the new
    /// event itself always stays); returns its offset and what the eviction freed.
    public mutating func append(_ item: Item, bytes: Int, wallMs: Int64, keepingAtMost maxEvents: Int, maxBytes: Int = .max)
        -> (offset: StreamOffset, freedBytes: Int, freedEvents: Int)
    {
        let offset = append(item, bytes: bytes, wallMs: wallMs)
        var freedBytes = 0
        var freedEvents = 0
        while queue.count > maxEvents || (self.bytes > maxBytes && queue.count > 1) {
            freedBytes += evictOldest()
            freedEvents += 1
        }
        return (offset, freedBytes, freedEvents)
    }

    /// Evicts the oldest event; returns its size.
    @discardableResult
    public mutating func evictOldest() -> Int {
        guard let first = queue.popFirst() else { return 0 }
        lastEvicted = first.offset
        bytes -= first.bytes
        return first.bytes
    }

    /// Whether a read after `offset` can be answered completely.
    public func reaches(_ offset: StreamOffset) -> Bool {
        if offset == head { return true }
        if offset > head { return false }
        if offset == .zero { return lastEvicted == nil }
        if offset == lastEvicted { return true }
        return index(of: offset) != nil
    }

    /// The events after `offset`, at most `limit` of them and about `maxBytes` (at least one).
    public func read(after offset: StreamOffset, limit: Int, maxBytes: Int = .max) -> Result<HistoryPage<Item>, HistoryError> {
        guard reaches(offset) else { return .failure(.unavailable) }
        var out: [(offset: StreamOffset, item: Item)] = []
        var size = 0
        var i = firstIndex(after: offset)
        while i < queue.count, out.count < max(limit, 1) {
            let e = queue[i]
            if !out.isEmpty && size + e.bytes > maxBytes { break }
            out.append((e.offset, e.item))
            size += e.bytes
            i += 1
        }
        return .success(HistoryPage(entries: out, more: i < queue.count, head: head))
    }

    /// Binary search: the index of the entry at `offset`.
    private func index(of offset: StreamOffset) -> Int? {
        let i = firstIndex(atOrAfter: offset)
        return i < queue.count && queue[i].offset == offset ? i : nil
    }

    /// Positions are 0-based from the oldest retained event.
    private func firstIndex(after offset: StreamOffset) -> Int {
        let i = firstIndex(atOrAfter: offset)
        return i < queue.count && queue[i].offset == offset ? i + 1 : i
    }

    private func firstIndex(atOrAfter offset: StreamOffset) -> Int {
        var lo = 0
        var hi = queue.count
        while lo < hi {
            let mid = lo + (hi - lo) / 2
            if queue[mid].offset < offset { lo = mid + 1 } else { hi = mid }
        }
        return lo
    }
}

extension StreamHistory.Entry: Sendable where Item: Sendable {}
extension StreamHistory: Sendable where Item: Sendable {}
