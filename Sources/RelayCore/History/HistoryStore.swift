/// The in-memory history of many streams under one budget: per stream the last
/// `maxEvents` events no older than `maxAgeMs`, and at most `maxBytes` in all, the oldest events
/// of any stream going first. A value type fed items and wall time; the memory broker keeps one
/// per lock stripe.
public struct HistoryStore<Item> {
    public let limits: HistoryLimits
    private var streams: [StreamKey: StreamHistory<Item>] = [:]
    /// Every retained event in append order across streams (for the byte budget and the age
    /// limit). Entries a stream already dropped on its own count limit are skipped when reached.
    private var order = FIFO<(stream: StreamKey, offset: StreamOffset, wallMs: Int64)>()
    public private(set) var totalBytes = 0
    public private(set) var totalEvents = 0

    public init(limits: HistoryLimits) {
        self.limits = limits
    }

    public var streamCount: Int { streams.count }
    /// Entries in the append-order index (live and stale), for tests of its bound.
    var orderCount: Int { order.count }

    /// Appends an event to `stream`; returns its offset.
    public mutating func append(_ item: Item, bytes: Int, to stream: StreamKey, wallMs: Int64) -> StreamOffset {
        // In place: one lookup, and the stream's entries are never copied.
        let appended = streams[stream, default: StreamHistory()].append(item, bytes: bytes, wallMs: wallMs, keepingAtMost: limits.maxEvents, maxBytes: limits.maxStreamBytes)
        totalBytes += bytes - appended.freedBytes
        totalEvents += 1 - appended.freedEvents
        order.append((stream, appended.offset, wallMs))
        trim(wallMs: wallMs)
        return appended.offset
    }

    /// Drops what is older than the age limit or over the byte budget, and streams left with
    /// nothing that have been idle for the age limit.
    public mutating func trim(wallMs: Int64) {
        let cutoff = wallMs - limits.maxAgeMs
        while let first = order.first, first.wallMs <= cutoff || totalBytes > limits.maxBytes {
            _ = order.popFirst()
            guard let index = streams.index(forKey: first.stream) else { continue }
            if streams.values[index].entries.first?.offset == first.offset {
                totalBytes -= streams.values[index].evictOldest()
                totalEvents -= 1
            }
            // An empty stream idle for the whole window is forgotten: an offset of it is then
            // unknown (never answered partially: a new stream's head is `zero`).
            let history = streams.values[index]
            if history.entries.isEmpty && Int64(clamping: history.head.ms) <= cutoff {
                streams.remove(at: index)
            }
        }
        // Entries a stream evicted on its count limit stay in `order` until reached; keep the
        // index from growing past twice the live events.
        if order.count > 2 * max(totalEvents, 1024) {
            order = FIFO(order.elements.filter { e in
                guard let h = streams[e.stream], let oldest = h.entries.first?.offset else { return false }
                return e.offset >= oldest
            })
        }
    }

    /// The stream's newest offset (`zero` for a stream with no history).
    public func head(of stream: StreamKey) -> StreamOffset {
        streams[stream]?.head ?? .zero
    }

    /// The events of `stream` after `offset` (see `StreamHistory.read`).
    public func read(_ stream: StreamKey, after offset: StreamOffset, limit: Int, maxBytes: Int = .max) -> Result<HistoryPage<Item>, HistoryError> {
        guard let history = streams[stream] else {
            return offset == .zero ? .success(HistoryPage(entries: [], more: false, head: .zero)) : .failure(.unavailable)
        }
        return history.read(after: offset, limit: limit, maxBytes: maxBytes)
    }
}

extension HistoryStore: Sendable where Item: Sendable {}
