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

    private var queue = DeadlineQueue<Departure>()

    public init() {}

    public var count: Int { queue.count }

    /// The earliest deadline queued.
    public var nextDeadline: Int64? { queue.pending.first?.until }

    /// Queues a departure. Deadlines come in order (one grace, a monotonic clock); one that
    /// does not is queued after the last anyway, ending a little late rather than never.
    public mutating func append(_ departure: Departure) {
        var d = departure
        if let last = queue.lastDeadline, last > d.until { d.until = last }
        queue.append(d, until: d.until)
    }

    /// Takes the departures due at `now`, in order.
    public mutating func due(now: Int64) -> [Departure] {
        queue.popDue(now: now).map(\.element)
    }

    /// Takes every departure, due or not (shutdown).
    public mutating func all() -> [Departure] {
        queue.popAll().map(\.element)
    }
}
