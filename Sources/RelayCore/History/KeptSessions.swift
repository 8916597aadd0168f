/// Disconnected sessions kept for recovery on one node, by `pid`, as a value type: bounded in
/// all (`maxRecords`) and per user (`maxPerUser`), the oldest evicted first, in O(1) amortised
/// (no scan of the store at its cap: one user dropping connections in a loop evicts only their
/// own oldest sessions, and costs everyone else nothing).
///
/// Every record is kept for the same window, so insertion order is expiry order: one FIFO for
/// the store and one per user. A record taken or replaced leaves a stale entry behind, skipped
/// when it reaches the front; each FIFO is compacted when stale entries outnumber live ones.
public struct KeptSessions: Sendable {
    private struct Kept: Sendable {
        var record: KeptSession
        var expiresAtMs: Int64
        var sequence: UInt64
    }

    private struct Entry: Sendable, Equatable {
        var pid: String
        var sequence: UInt64
    }

    public let maxRecords: Int
    public let maxPerUser: Int
    private var kept: [String: Kept] = [:]
    private var order = FIFO<Entry>()
    private var perUser: [String: FIFO<Entry>] = [:]
    private var liveByUser: [String: Int] = [:]
    private var nextSequence: UInt64 = 0

    public init(maxRecords: Int, maxPerUser: Int) {
        self.maxRecords = max(1, maxRecords)
        self.maxPerUser = max(1, maxPerUser)
    }

    /// Records kept now (expired ones included until they are swept).
    public var count: Int { kept.count }

    /// Entries in the FIFOs, stale ones included (bounded by `2 × count` plus a constant).
    var bookkeeping: Int { order.count + perUser.values.reduce(0) { $0 + $1.count } }

    /// Keeps `record` until `nowMs + windowMs`; returns the pids evicted to make room.
    @discardableResult
    public mutating func put(_ record: KeptSession, nowMs: Int64, windowMs: Int64) -> [String] {
        sweep(nowMs: nowMs)
        var evicted: [String] = []
        if kept[record.pid] != nil { remove(record.pid) }
        let user = record.userID
        while (liveByUser[user] ?? 0) >= maxPerUser, let pid = popOldest(&perUser[user, default: FIFO()]) {
            remove(pid)
            evicted.append(pid)
        }
        while kept.count >= maxRecords, let pid = popOldest(&order) {
            remove(pid)
            evicted.append(pid)
        }
        nextSequence &+= 1
        let entry = Entry(pid: record.pid, sequence: nextSequence)
        kept[record.pid] = Kept(record: record, expiresAtMs: nowMs &+ max(0, windowMs), sequence: nextSequence)
        order.append(entry)
        perUser[user, default: FIFO()].append(entry)
        liveByUser[user, default: 0] += 1
        compactIfStale(user: user)
        return evicted
    }

    public enum Take: Sendable, Equatable {
        case taken(KeptSession)
        case notFound
        /// Another user's pid: left in place, so a leaked pid cannot spoil its owner's recovery.
        case otherUser
    }

    /// Takes the record of `pid` if it is `user`'s and not expired.
    public mutating func take(pid: String, user: String, nowMs: Int64) -> Take {
        guard let entry = kept[pid] else { return .notFound }
        guard entry.expiresAtMs > nowMs else {
            remove(pid)
            return .notFound
        }
        guard entry.record.userID == user else { return .otherUser }
        remove(pid)
        return .taken(entry.record)
    }

    /// Drops expired records from the front (O(1) amortised per call).
    public mutating func sweep(nowMs: Int64) {
        while let first = order.first {
            if let live = kept[first.pid], live.sequence == first.sequence {
                guard live.expiresAtMs <= nowMs else { return }
                remove(first.pid)
            }
            _ = order.popFirst()
        }
    }

    /// The oldest live pid of `fifo`, popped (stale entries before it are dropped).
    private func popOldest(_ fifo: inout FIFO<Entry>) -> String? {
        while let first = fifo.popFirst() {
            if let live = kept[first.pid], live.sequence == first.sequence { return first.pid }
        }
        return nil
    }

    private mutating func remove(_ pid: String) {
        guard let old = kept.removeValue(forKey: pid) else { return }
        let user = old.record.userID
        let left = (liveByUser[user] ?? 1) - 1
        if left <= 0 {
            liveByUser.removeValue(forKey: user)
            perUser.removeValue(forKey: user)
        } else {
            liveByUser[user] = left
        }
    }

    /// Stale entries (taken, replaced) are dropped once they outnumber the live ones.
    private mutating func compactIfStale(user: String) {
        if order.count > 2 * kept.count + 64 {
            let live = kept
            order.removeAll { live[$0.pid]?.sequence != $0.sequence }
        }
        if let fifo = perUser[user], fifo.count > 2 * (liveByUser[user] ?? 0) + 8 {
            let live = kept
            perUser[user]?.removeAll { live[$0.pid]?.sequence != $0.sequence }
        }
    }
}
