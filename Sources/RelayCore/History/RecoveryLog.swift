/// Where one socket stands in each of its streams, so that the single offset a Socket.IO client
/// reports on reconnect (the last event it received) tells what it missed in *every* stream.
///
/// The socket's events leave in the order they were queued, over one ordered transport: if the
/// client received event `e`, it received every event queued before `e`. The log records that
/// order compactly — consecutive events of one stream form one run — and the position of each
/// stream when the socket started following it (`base`). The cut of stream `S` for a client
/// that last received `e` is then the last event of `S` queued at or before `e`, or `S`'s base.
///
/// Bounded: at most `maxRuns` runs; older runs fold into `base`, and a client whose last event
/// is older than the log can no longer be placed (`cuts` returns `nil`: not recovered).
public struct RecoveryLog: Sendable, Equatable {
    public struct Run: Sendable, Equatable {
        public var stream: StreamKey
        public var first: StreamOffset
        public var last: StreamOffset
    }

    public let maxRuns: Int
    /// Each followed stream's position before the oldest retained run.
    public private(set) var base: [StreamKey: StreamOffset] = [:]
    private var queue = FIFO<Run>()
    /// The runs, oldest first.
    public var runs: ArraySlice<Run> { queue.elements }
    /// Runs were folded into `base`: a client that received nothing cannot be placed.
    public private(set) var folded = false
    /// The newest offset of each followed stream the socket has (its base, or sent since).
    public private(set) var latest: [StreamKey: StreamOffset] = [:]
    /// Streams the socket joined whose first live event has not come yet: it may be at or
    /// before the head read at the join (`join(_:at:)`).
    private var joining: Set<StreamKey> = []

    public init(maxRuns: Int = 64) {
        self.maxRuns = max(1, maxRuns)
    }

    public init(maxRuns: Int, base: [StreamKey: StreamOffset], runs: [Run], folded: Bool) {
        self.maxRuns = max(1, maxRuns)
        self.base = base
        self.queue = FIFO(runs.suffix(self.maxRuns))
        self.folded = folded || runs.count > self.maxRuns
        self.latest = base
        for run in self.queue.elements where base[run.stream] != nil { latest[run.stream] = max(latest[run.stream] ?? .zero, run.last) }
    }

    public var streams: Set<StreamKey> { Set(base.keys) }

    /// The socket now follows `stream`, whose newest offset is `head`.
    public mutating func follow(_ stream: StreamKey, from head: StreamOffset) {
        joining.remove(stream)
        base[stream] = head
        latest[stream] = head
        queue.removeAll { $0.stream == stream }
    }

    /// The socket joined `stream` (`room:join`) and is already in its fan-out; the stream's
    /// newest offset, read after that, is `head`. An event published between the join and that
    /// read is at or before `head` but still on its way to the socket as a live delivery: the
    /// first live event is therefore taken whatever its offset (no replay races a join, so it
    /// cannot be a duplicate), and the stream is followed from there.
    public mutating func join(_ stream: StreamKey, at head: StreamOffset) {
        follow(stream, from: head)
        joining.insert(stream)
    }

    /// The socket no longer follows `stream`.
    public mutating func unfollow(_ stream: StreamKey) {
        joining.remove(stream)
        base.removeValue(forKey: stream)
        latest.removeValue(forKey: stream)
        queue.removeAll { $0.stream == stream }
    }

    /// An event of `stream` at `offset` is about to be queued to the socket. Returns `false` when
    /// the socket already has it (an offset at or before the stream's latest): the caller drops
    /// it, so nothing reaches a socket twice (a recovery's replay racing the live event).
    @discardableResult
    public mutating func record(_ stream: StreamKey, _ offset: StreamOffset) -> Bool {
        guard let newest = latest[stream] else { return true }
        guard offset > newest || joining.remove(stream) != nil else { return false }
        joining.remove(stream)
        latest[stream] = offset
        if var last = queue.last, last.stream == stream, offset > last.last {
            last.last = offset
            queue[queue.count - 1] = last
            return true
        }
        queue.append(Run(stream: stream, first: offset, last: offset))
        while queue.count > maxRuns, let oldest = queue.popFirst() {
            base[oldest.stream] = max(base[oldest.stream] ?? .zero, oldest.last)
            folded = true
        }
        return true
    }

    /// Each followed stream's cut for a client whose last received event is `last` (`nil`: it
    /// received none). `nil` when that cannot be told exactly: the event is not in the log (older
    /// than it, or never sent), or its tag names two of the socket's streams.
    public func cuts(lastReceived last: WireOffset?) -> [StreamKey: StreamOffset]? {
        guard let last else { return folded ? nil : base }
        let named = base.keys.filter { $0.tag == last.tag }
        guard named.count == 1, let stream = named.first else { return nil }
        guard let position = runs.lastIndex(where: { $0.stream == stream && $0.first <= last.offset && last.offset <= $0.last }) else {
            return nil
        }
        var cuts = base
        for run in runs[..<position] { cuts[run.stream] = run.last }
        cuts[stream] = last.offset
        return cuts
    }
}
