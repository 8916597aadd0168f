import Logging
import NIOConcurrencyHelpers
import NIOCore
import RelayBackends
import RelayCore
import RelayRedis
import RelayLocks

/// The broker of a cluster: events cross nodes on per-stream Redis pub/sub channels (sharded
/// when Redis has it), and recoverable events go through one script that appends them to the
/// stream's Redis stream (its id is the offset, the same on every node) and publishes them.
/// A node delivers its own recoverable events when Redis answered with the offset; other nodes
/// when the publication arrives — in stream order everywhere.
///
/// Redis down: events are delivered on this node only, without an offset, and the instant is
/// recorded in Redis when it returns (`relay:history-gap`), so no recovery reaches across it.
///
/// Redis Cluster: a stream's history (`relay:history:r:{room}` / `relay:history:u:{user}`) has
/// its channel's tag (`relay:room:{room}` / `relay:user:{user}`), so the publish script's write
/// and publication are in one slot; the gap marker is read with its own GET, pipelined with
/// the history read, and applied here.
public final class RedisBroker: Broker, ControlChannel {
    package let bus: ClusterBus
    public let limits: HistoryLimits
    private let subscriber = SubscriberSlot()
    private let controlHandler = CallbackSlot<@Sendable (ControlMessage) -> Void>()
    package static let controlChannel = "relay:control"
    /// Recoverable events could not be stored since this wall time (ms).
    private let gapSince = AuditedLock<Int64?>(nil)
    private let wallMs: @Sendable () -> Int64

    public init(bus: ClusterBus, limits: HistoryLimits, wallMs: @escaping @Sendable () -> Int64) {
        self.bus = bus
        self.limits = limits
        self.wallMs = wallMs
        bus.onMessage = { [weak self] channel, payload in self?.received(channel: channel, payload: payload) }
        bus.onLinkUp = { [weak self] in self?.recordGap() }
        bus.redis.subscribe([Self.controlChannel])
    }

    public func broadcast(_ control: ControlMessage) {
        let body = JSONValue.object([("o", .string(bus.nodeID)), ("m", control.json)])
        bus.publish(Self.controlChannel, ByteBuffer(bytes: JSONWriter.bytes(body)))
    }

    public func setControlHandler(_ handler: @escaping @Sendable (ControlMessage) -> Void) {
        controlHandler.set(handler)
    }

    public var keepsHistory: Bool { limits.isEnabled }
    public var crossesNodes: Bool { true }
    /// The control channel rides on the same link.
    public var reachesOtherNodes: Bool { bus.isUp }

    package static func channel(_ stream: StreamKey) -> String {
        switch stream {
        case .room(let room): return ClusterKeys.roomChannel(room)
        case .user(let user): return ClusterKeys.userChannel(user)
        }
    }

    /// A stream's history, in its channel's slot: the tag is the room or user, as in
    /// `relay:room:{room}` / `relay:user:{user}` (the publish script writes one and publishes on
    /// the other).
    package static func historyKey(_ stream: StreamKey) -> String {
        switch stream {
        case .room(let room): return "relay:history:r:" + ClusterKeys.tag(room)
        case .user(let user): return "relay:history:u:" + ClusterKeys.tag(user)
        }
    }

    /// The publish script's arguments before the envelope (appended as raw bytes).
    package static func publishCommand(_ stream: StreamKey, limits: HistoryLimits, sharded: Bool) -> [String] {
        ["EVAL", HistoryScripts.publish, "1", historyKey(stream), channel(stream), String(limits.maxEvents), String(limits.maxAgeMs), sharded ? "SPUBLISH" : "PUBLISH"]
    }

    package static func readCommand(_ stream: StreamKey, after offset: StreamOffset, limit: Int) -> [String] {
        ["EVAL", HistoryScripts.read, "1", historyKey(stream), offset.description, String(max(1, limit))]
    }

    package static func headCommand(_ stream: StreamKey) -> [String] {
        ["EVAL", HistoryScripts.head, "1", historyKey(stream)]
    }

    /// Raises the gap marker to ARGV[1] (ms), expiring after ARGV[2] ms.
    package static let recordGapScript =
        "local v = tonumber(redis.call('GET', KEYS[1]) or '0'); if tonumber(ARGV[1]) > v then redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2]) end; return 1"

    package static func recordGapCommand(until: Int64, ttlMs: Int64) -> [String] {
        ["EVAL", recordGapScript, "1", gapKey, String(until), String(max(1, ttlMs))]
    }
    package static let gapKey = "relay:history-gap"

    public func attach(_ subscriber: any BrokerSubscriber) {
        self.subscriber.set(subscriber)
    }

    public func subscribe(_ stream: StreamKey) { bus.redis.subscribe([Self.channel(stream)]) }
    public func unsubscribe(_ stream: StreamKey) { bus.redis.unsubscribe([Self.channel(stream)]) }
    public func whenSubscribed(_ stream: StreamKey, on loop: any EventLoop) -> EventLoopFuture<Void> {
        bus.redis.subscribed(Self.channel(stream)).hop(to: loop)
    }

    public func publish(_ publication: Publication, to stream: StreamKey, routing: Routing, recoverable: Bool, deliver: @escaping @Sendable (StreamOffset?) -> Void) {
        let envelope = ClusterEnvelope(origin: bus.nodeID, publication: publication, routing: routing).encode()
        guard recoverable, keepsHistory else {
            deliver(nil)
            bus.publish(Self.channel(stream), envelope)
            return
        }
        guard bus.isUp else {
            // Not stored and not sent to the other nodes: degraded to this node.
            storeFailed()
            bus.metrics.degraded.increment()
            deliver(nil)
            return
        }
        let limits = self.limits
        bus.redis.send({ sharded in Self.publishCommand(stream, limits: limits, sharded: sharded) }, payload: envelope).whenComplete { result in
            // Stored and published: this node's sockets get it from the channel, in stream order
            // with every other node's events (a reply and a publication on two connections would
            // not keep that order).
            if case .success(let reply) = result, reply.string.flatMap({ StreamOffset(id: $0) }) != nil { return }
            if case .failure(let error) = result { RedisRefusal.log(self.bus.logger, error, "history publish") }
            self.storeFailed()
            self.bus.metrics.degraded.increment()
            deliver(nil)
        }
    }

    private func storeFailed() {
        let now = wallMs()
        gapSince.withLockedValue { if $0 == nil { $0 = now } }
    }

    /// Redis is back: no recovery may reach across the time this node could not store.
    private func recordGap() {
        guard gapSince.withLockedValue({ $0 }) != nil else { return }
        let until = wallMs()
        bus.redis.send(Self.recordGapCommand(until: until, ttlMs: limits.maxAgeMs * 2))
            .whenSuccess { _ in self.gapSince.withLockedValue { $0 = nil } }
    }

    public func history(of stream: StreamKey, after offset: StreamOffset, limit: Int, maxBytes: Int, on loop: any EventLoop)
        -> EventLoopFuture<Result<HistoryPage<Publication>, HistoryError>>
    {
        guard limit > 0 else {
            // Only the head.
            guard keepsHistory else { return loop.makeSucceededFuture(.success(HistoryPage(entries: [], more: false, head: .zero))) }
            return bus.redis.send(Self.headCommand(stream))
                .map { $0.string.flatMap { StreamOffset(id: $0) } ?? .zero }
                .recover { _ in .zero }
                .map { .success(HistoryPage(entries: [], more: false, head: $0)) }
                .hop(to: loop)
        }
        guard keepsHistory else { return loop.makeSucceededFuture(.failure(.unavailable)) }
        // The gap marker (its own slot) is read beside the stream, pipelined: nothing recovers
        // across a time some node could not store (0-0 included: while the marker lives, the
        // start of a stream is not known to be complete).
        let gap = bus.redis.send(["GET", Self.gapKey])
        let read = bus.redis.send(Self.readCommand(stream, after: offset, limit: limit))
        return gap.and(read)
            .always { [logger = bus.logger] in if case .failure(let error) = $0 { RedisRefusal.log(logger, error, "history read") } }
            .map { gapReply, reply -> Result<HistoryPage<Publication>, HistoryError> in
                guard let marker = Self.gapMs(gapReply) else { return .failure(.storeDown) }
                if marker > 0 && offset.ms <= marker { return .failure(.unavailable) }
                guard let items = reply.elements, let status = items.first?.int else { return .failure(.storeDown) }
                guard status == 0, items.count == 4, let head = items[1].string.flatMap({ StreamOffset(id: $0) }) else { return .failure(.unavailable) }
                var entries: [(offset: StreamOffset, item: Publication)] = []
                var size = 0
                var more = items[3].int == 1
                for entry in items[2].elements ?? [] {
                    guard let parts = entry.elements, parts.count == 2, let id = parts[0].string.flatMap({ StreamOffset(id: $0) }),
                        let fields = parts[1].elements, fields.count >= 2, case .bulkString(let bytes) = fields[1],
                        let envelope = ClusterEnvelope.decode(bytes)
                    else { return .failure(.storeDown) }
                    let publication = envelope.publication
                    if !entries.isEmpty && size + publication.byteCount > maxBytes {
                        more = true
                        break
                    }
                    size += publication.byteCount
                    entries.append((id, publication))
                }
                return .success(HistoryPage(entries: entries, more: more, head: head))
            }
            .recover { _ in .failure(.storeDown) }
            .hop(to: loop)
    }

    /// The gap marker's value in ms (0 when there is none); nil when it is not a number.
    package static func gapMs(_ reply: RESPValue) -> UInt64? {
        if case .null = reply { return 0 }
        return reply.string.flatMap { UInt64($0) }
    }

    /// A publication from another node: `<id>\n<envelope>` for recoverable events.
    private func received(channel: String, payload: ByteBuffer) {
        if channel == Self.controlChannel {
            guard let json = try? JSONParser.parse(Array(payload.readableBytesView)), json["o"]?.stringValue != bus.nodeID,
                let message = json["m"].flatMap({ ControlMessage(json: $0) }), let handler = controlHandler.value
            else { return }
            handler(message)
            return
        }
        var payload = payload
        var id: StreamOffset?
        if let first = payload.readableBytesView.first, first != UInt8(ascii: "{") {
            let view = payload.readableBytesView
            guard let newline = view.firstIndex(of: UInt8(ascii: "\n")), let offset = StreamOffset(id: String(decoding: view[view.startIndex..<newline], as: UTF8.self)) else { return }
            id = offset
            payload.moveReaderIndex(forwardBy: newline - view.startIndex + 1)
        }
        // This node's own plain events were delivered when published; its recoverable ones come
        // back here, like everyone's.
        guard let envelope = ClusterEnvelope.decode(payload), envelope.origin != bus.nodeID || id != nil,
            let subscriber = subscriber.subscriber, let stream = Self.stream(ofChannel: channel)
        else { return }
        subscriber.received(envelope.publication, on: stream, offset: id, routing: Routing(excludeUser: envelope.excludeUser, skipMembersOf: envelope.skipMembersOf, allowedIn: envelope.allowedIn, window: envelope.window))
    }

    /// The stream a channel carries. On bytes, like Redis: a name that starts with a combining
    /// mark makes one `Character` of it and the tag's `{`.
    package static func stream(ofChannel channel: String) -> StreamKey? {
        if let tagged = Self.dropPrefix("relay:room:", of: channel), let room = ClusterKeys.untag(tagged) { return .room(room) }
        if let tagged = Self.dropPrefix("relay:user:", of: channel), let user = ClusterKeys.untag(tagged) { return .user(user) }
        return nil
    }

    private static func dropPrefix(_ prefix: String, of channel: String) -> Substring? {
        let bytes = channel.utf8
        guard bytes.starts(with: prefix.utf8) else { return nil }
        return Substring(bytes.dropFirst(prefix.utf8.count))
    }
}
