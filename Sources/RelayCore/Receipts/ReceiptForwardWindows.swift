/// Committed receipts held per (room, kind) for a short window (`receipt-window-ms`), so a room
/// hears one batch event for every reader in the window instead of one per reader, as typing is
/// coalesced. A window opens at its first receipt and is flushed `windowMs` later, or at once
/// when it holds `maxItems` (the batch limit): nothing waits longer, nothing grows unbounded.
///
/// The window is one length for every room, so windows close in the order they opened: a
/// queue of deadlines, not a heap. A window flushed early leaves its deadline behind, skipped
/// when it comes.
public struct ReceiptForwardWindows: Sendable {
    public struct Key: Hashable, Sendable {
        public var room: String
        public var kind: ReceiptKind

        public init(room: String, kind: ReceiptKind) {
            self.room = room
            self.kind = kind
        }
    }

    /// One window's receipts, to forward together.
    public struct Flush: Sendable, Equatable {
        public var room: String
        public var kind: ReceiptKind
        public var receipts: [Receipt]
    }

    public let windowMs: Int64
    public let maxItems: Int
    private var open: [Key: (until: Int64, receipts: [Receipt])] = [:]
    private var deadlines = DeadlineQueue<Key>()

    public init(windowMs: Int64, maxItems: Int) {
        self.windowMs = max(1, windowMs)
        self.maxItems = max(1, maxItems)
    }

    /// Receipts held, over every window.
    public var heldCount: Int { open.values.reduce(0) { $0 + $1.receipts.count } }

    /// The earliest deadline of an open window.
    public var nextDeadline: Int64? {
        deadlines.pending.first { open[$0.element]?.until == $0.until }?.until
    }

    /// Adds committed receipts of one room and kind. Returns the windows to flush now (those
    /// that reached `maxItems`), each at most `maxItems` receipts.
    public mutating func add(_ receipts: [Receipt], room: String, kind: ReceiptKind, now: Int64) -> [Flush] {
        let key = Key(room: room, kind: kind)
        var out: [Flush] = []
        var rest = receipts[...]
        while !rest.isEmpty {
            var window = open.removeValue(forKey: key) ?? {
                let until = now + windowMs
                deadlines.append(key, until: until)
                return (until: until, receipts: [])
            }()
            let space = maxItems - window.receipts.count
            window.receipts.append(contentsOf: rest.prefix(space))
            rest = rest.dropFirst(space)
            if window.receipts.count >= maxItems {
                out.append(Flush(room: key.room, kind: kind, receipts: window.receipts))
            } else {
                open[key] = window
            }
        }
        return out
    }

    /// The windows due at `now`, in the order they opened.
    public mutating func due(now: Int64) -> [Flush] {
        take(deadlines.popDue(now: now))
    }

    /// Every open window, due or not (shutdown).
    public mutating func all() -> [Flush] {
        take(deadlines.popAll())
    }

    /// The windows still open at these deadlines (a window flushed early left its deadline).
    private mutating func take(_ due: [(until: Int64, element: Key)]) -> [Flush] {
        due.compactMap { d -> Flush? in
            guard let window = open[d.element], window.until == d.until else { return nil }
            open[d.element] = nil
            return Flush(room: d.element.room, kind: d.element.kind, receipts: window.receipts)
        }
    }
}
