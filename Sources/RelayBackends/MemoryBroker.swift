import NIOConcurrencyHelpers
import NIOCore
import RelayCore
import RelayLocks

/// The broker of a single node: nothing crosses to other nodes; history is kept in memory, in
/// 16 lock stripes by stream, so publishers to different rooms rarely meet on one lock and no lock
/// is held for more than an append or a page copy.
public final class MemoryBroker: Broker {
    public let limits: HistoryLimits
    private let stripes: [AuditedLock<HistoryStore<Publication>>]
    private let wallMs: @Sendable () -> Int64

    public init(limits: HistoryLimits, wallMs: @escaping @Sendable () -> Int64) {
        self.limits = limits
        self.wallMs = wallMs
        var perStripe = limits
        perStripe.maxBytes = max(1, limits.maxBytes / 16)
        self.stripes = (0..<16).map { _ in AuditedLock(HistoryStore(limits: perStripe)) }
    }

    /// What an entry costs beyond its frame bytes, as measured (LoadTests/history: ~730 bytes of
    /// RSS per 212-byte event): the message struct, the buffer's allocation, the entry and its
    /// place in the age index. Counted so `--history-max-bytes` bounds real memory.
    package static let entryOverhead = 512

    public var keepsHistory: Bool { limits.isEnabled }
    public var crossesNodes: Bool { false }

    private func stripe(_ stream: StreamKey) -> AuditedLock<HistoryStore<Publication>> {
        stripes[Int(stream.tag % 16)]
    }

    /// One node: nothing comes from elsewhere.
    public func attach(_ subscriber: any BrokerSubscriber) {}
    public func subscribe(_ stream: StreamKey) {}
    public func whenSubscribed(_ stream: StreamKey, on loop: any EventLoop) -> EventLoopFuture<Void> { loop.makeSucceededVoidFuture() }
    /// Every stream is received already: the heads, now.
    public func subscribedHeads(_ streams: [StreamKey], on loop: any EventLoop) -> EventLoopFuture<[(StreamKey, StreamOffset)]> {
        loop.makeSucceededFuture(streams.map { ($0, head(of: $0)) })
    }
    public func unsubscribe(_ stream: StreamKey) {}

    public func publish(_ publication: Publication, to stream: StreamKey, routing: Routing, recoverable: Bool, deliver: @escaping @Sendable (StreamOffset?) -> Void) {
        guard recoverable, keepsHistory else { return deliver(nil) }
        let now = wallMs()
        // Under the stream's lock: offsets are given and handed to the event loops in one order,
        // so every socket gets a stream's events in offset order (what recovery relies on). The
        // publisher's `deliver` only enqueues on loops for an event with an offset.
        stripe(stream).withLockedValue { store in
            deliver(store.append(publication, bytes: publication.byteCount + Self.entryOverhead, to: stream, wallMs: now))
        }
    }

    /// The stream's newest offset, now.
    public func head(of stream: StreamKey) -> StreamOffset {
        stripe(stream).withLockedValue { $0.head(of: stream) }
    }

    public func history(of stream: StreamKey, after offset: StreamOffset, limit: Int, maxBytes: Int, on loop: any EventLoop)
        -> EventLoopFuture<Result<HistoryPage<Publication>, HistoryError>>
    {
        guard limit > 0 else { return loop.makeSucceededFuture(.success(HistoryPage(entries: [], more: false, head: head(of: stream)))) }
        let now = wallMs()
        let page = stripe(stream).withLockedValue { store in
            store.trim(wallMs: now)
            return store.read(stream, after: offset, limit: limit, maxBytes: maxBytes)
        }
        return loop.makeSucceededFuture(page)
    }

    /// Drops what is past the age limit in every stripe (appends and reads trim their own
    /// stripe; this covers rooms that went quiet). One lock at a time, each held for the trim only.
    public func trimExpired() {
        let now = wallMs()
        for stripe in stripes { stripe.withLockedValue { $0.trim(wallMs: now) } }
    }

    public var memoryUsage: (events: Int, bytes: Int) {
        stripes.reduce((0, 0)) { sum, stripe in
            stripe.withLockedValue { (sum.0 + $0.totalEvents, sum.1 + $0.totalBytes) }
        }
    }
}
