/// How much history is kept: per stream the last `maxEvents` events no older than `maxAgeMs`
/// and at most `maxStreamBytes` (the newest event always stays), and `maxBytes` in all. The
/// per-stream bound keeps one busy room (or one user's stream) from taking the whole budget.
public struct HistoryLimits: Sendable, Equatable {
    public var maxEvents: Int
    public var maxAgeMs: Int64
    public var maxBytes: Int
    public var maxStreamBytes: Int

    public init(maxEvents: Int, maxAgeMs: Int64, maxBytes: Int, maxStreamBytes: Int) {
        self.maxEvents = maxEvents
        self.maxAgeMs = maxAgeMs
        self.maxBytes = maxBytes
        self.maxStreamBytes = maxStreamBytes
    }

    /// History is off (nothing is stored, nothing can be recovered).
    public var isEnabled: Bool { maxEvents > 0 && maxAgeMs > 0 && maxBytes > 0 }
}

/// Why a history read cannot answer.
public enum HistoryError: Error, Sendable, Equatable {
    /// The history no longer reaches back to the offset (trimmed, expired, restarted), or the
    /// offset was never one of this stream's.
    case unavailable
    /// The history store cannot be reached (Redis down).
    case storeDown
}

/// One page of a stream's history after an offset.
public struct HistoryPage<Item> {
    public var entries: [(offset: StreamOffset, item: Item)]
    /// More entries follow the last one returned.
    public var more: Bool
    /// The stream's newest offset when it was read.
    public var head: StreamOffset

    public init(entries: [(offset: StreamOffset, item: Item)], more: Bool, head: StreamOffset) {
        self.entries = entries
        self.more = more
        self.head = head
    }
}

extension HistoryPage: Sendable where Item: Sendable {}
