/// Users whose last connection on this node dropped within the presence grace, in the order
/// their holds end: each departure names the rooms it left holds in. The grace is one length
/// for the whole node, so departures end in the order they were made: a queue, not a heap.
///
/// A departure only says where to look when it is due: whether the user came back (and took
/// a hold over) is the room registry's and the connection registry's to say, under their own
/// locks.
public struct Departures: Sendable {
    public struct Departure: Sendable, Equatable {
        public var user: String
        public var rooms: [String]
        /// When its holds end (monotonic ms).
        public var until: Int64

        public init(user: String, rooms: [String], until: Int64) {
            self.user = user
            self.rooms = rooms
            self.until = until
        }
    }

    private var queue: [Departure] = []
    /// The first departure still queued: taken ones are dropped in batches, not one by one.
    private var head = 0

    public init() {}

    public var count: Int { queue.count - head }

    /// The earliest deadline queued.
    public var nextDeadline: Int64? { head < queue.count ? queue[head].until : nil }

    /// Queues a departure. Deadlines come in order (one grace, a monotonic clock); one that
    /// does not is queued after the last anyway, ending a little late rather than never.
    public mutating func append(_ departure: Departure) {
        var d = departure
        if let last = queue.last, head < queue.count, last.until > d.until { d.until = last.until }
        queue.append(d)
    }

    /// Takes the departures due at `now`, in order.
    public mutating func due(now: Int64) -> [Departure] {
        var out: [Departure] = []
        while head < queue.count, queue[head].until <= now {
            out.append(queue[head])
            head += 1
        }
        if head == queue.count {
            queue.removeAll(keepingCapacity: queue.count <= 1024)
            head = 0
        } else if head >= 1024 && head * 2 >= queue.count {
            queue.removeFirst(head)
            head = 0
        }
        return out
    }

    /// Takes every departure, due or not (shutdown).
    public mutating func all() -> [Departure] {
        defer {
            queue = []
            head = 0
        }
        return Array(queue[head...])
    }
}
