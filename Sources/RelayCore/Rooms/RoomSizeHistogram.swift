/// Members per room as a cumulative-ready histogram, kept up to date on every join and leave
/// so that a metrics scrape costs the same with 30 000 rooms as with 10 (no walk of the rooms).
public struct RoomSizeHistogram: Sendable, Equatable {
    /// Upper bounds of the buckets (inclusive), ascending; a last `+Inf` bucket is implied.
    public static let bounds: [Int] = [1, 2, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000]

    /// Rooms whose size falls in each bucket (not cumulative); the last entry is `+Inf`.
    public private(set) var counts: [Int] = Array(repeating: 0, count: bounds.count + 1)
    /// Sum of the members of every room.
    public private(set) var sum = 0
    /// Rooms with at least one member.
    public private(set) var rooms = 0

    public init() {}

    /// Moves one room from size `old` to size `new` (0 means no room).
    public mutating func resize(from old: Int, to new: Int) {
        if old > 0 {
            counts[Self.bucket(old)] -= 1
            rooms -= 1
            sum -= old
        }
        if new > 0 {
            counts[Self.bucket(new)] += 1
            rooms += 1
            sum += new
        }
    }

    /// Adds another histogram's rooms (the server keeps one per lock stripe of rooms).
    public mutating func add(_ other: RoomSizeHistogram) {
        for i in counts.indices { counts[i] += other.counts[i] }
        sum += other.sum
        rooms += other.rooms
    }

    /// Cumulative counts per bound, `+Inf` last (Prometheus `le` buckets).
    public var cumulative: [Int] {
        var total = 0
        return counts.map { total += $0; return total }
    }

    static func bucket(_ size: Int) -> Int {
        bounds.firstIndex { size <= $0 } ?? bounds.count
    }
}
