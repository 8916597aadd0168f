import NIOCore
import RelayBackends
import RelayCore

/// Fan-out: who is listening (the audience, from the room directory or the registry), one
/// publish through the broker (which gives recoverable events their offset), then one hop per
/// event loop that holds recipients. An event is encoded once (and compressed once, when
/// deflate clients are connected); every recipient gets the same bytes. Other nodes get the
/// same bytes from the broker: the publisher is the broker's subscriber (`received`), made so
/// when it is made, and delivers them like its own.
public final class Publisher: BrokerSubscriber {
    /// What one publish needs from the shared state, read under one lock acquisition.
    struct Audience {
        var partitions: [Int]
        var recipients: Int
        var clients: ClientCounts.Snapshot
        /// The socket id of the excluded sender.
        var origin: String? = nil
    }

    let loops: [LoopPartition]
    let rooms: RoomDirectory
    let registry: ConnectionRegistry
    let broker: any Broker
    /// Backend emits with a window wait there.
    let windows: EmitWindowService
    private let deflaters = DeflaterPool()
    private let deflateThresholdBytes: Int

    init(loops: [LoopPartition], rooms: RoomDirectory, registry: ConnectionRegistry, broker: any Broker, windows: EmitWindowService, deflateThresholdBytes: Int) {
        self.loops = loops
        self.rooms = rooms
        self.registry = registry
        self.broker = broker
        self.windows = windows
        self.deflateThresholdBytes = deflateThresholdBytes
        // Other nodes' events (and, with Redis, this node's recoverable ones) come in here, and
        // the emits a window held go out here, when it closes.
        broker.attach(self)
        windows.setDeliver { [weak self] stream, message, routing in self?.deliverHere(stream, message, routing: routing) }
    }

    /// What a publish to `room` needs: one lock, the room's stripe. The counters are atomics;
    /// the excluded sender's sid is the caller's `origin` (a socket knows its own) or, when it
    /// did not give it, read from the registry.
    func roomAudience(_ room: String, excludeConnection: ConnectionID?, origin: String?) -> Audience {
        let (partitions, recipients) = rooms.audience(room: room, excluding: excludeConnection)
        return Audience(
            partitions: partitions, recipients: recipients, clients: registry.clients.snapshot,
            origin: origin ?? excludeConnection.flatMap(registry.sid(of:)))
    }

    func userAudience(_ user: String) -> Audience {
        let (ids, partitions) = registry.connections(of: user)
        return Audience(partitions: partitions, recipients: ids.count, clients: registry.clients.snapshot)
    }

    // A recoverable event's loops are read again once it has its offset (under the memory
    // broker's stream lock): a socket that joined after the audience was read, and read the
    // stream's history before this event was appended, is on one of them — else it would get
    // the event neither replayed nor live.

    /// Encodes an event once and delivers it to the room. Returns the number of recipients on
    /// this node (room members minus the excluded). `origin` is the excluded sender's sid, when
    /// the caller knows it. What the event is (recoverable, durable, its metric label) comes
    /// from its policy; `coalescingKey` lets a queued copy be replaced under backpressure;
    /// `window` holds a backend emit for its window.
    @discardableResult
    public func publish(
        room: String, event: EventPolicy, payload: JSONValue, excludeConnection: ConnectionID? = nil, origin: String? = nil, excludeUser: String? = nil,
        coalescingKey: CoalescingKey? = nil, attachments: [[UInt8]] = [], window: EmitWindow? = nil
    ) -> Int {
        let audience = roomAudience(room, excludeConnection: excludeConnection, origin: origin)
        // Windowed emits are superseded by the next one: never kept for recovery.
        let recoverable = broker.keepsHistory && event.isRecoverable && window == nil
        // Nobody else in the room, nothing to keep and no other node to tell: do not even encode.
        guard audience.recipients > 0 || recoverable || broker.crossesNodes else { return 0 }
        var encoded = attachments.isEmpty
            ? makeMessage(event, payload, coalescingKey: coalescingKey, deflateClients: audience.clients.deflate)
            : makeBinaryMessage(event, payload, attachments: attachments)
        encoded.origin = audience.origin
        let message = encoded
        let routing = Routing(excludeUser: excludeUser, window: window)
        let here = localPartition()
        let previous = here?.beginInlinePublish()
        defer { if let here, let previous { here.endInlinePublish(previous) } }
        broker.publish(message.publication, to: .room(room), routing: routing, recoverable: recoverable) { [self] offset in
            if let window { return windows.hold(.room(room), message, routing: routing, window: window) }
            let stamped = withOffsetVariant(message.at(.room(room), offset), clients: audience.clients)
            let partitions = offset == nil ? audience.partitions : rooms.partitions(room: room)
            deliver(room: room, message: stamped, partitions: partitions, excludeConnection: excludeConnection, excludeUser: excludeUser)
        }
        return audience.recipients
    }

    /// Delivers an event to every connected device of `user`. Returns the number of sockets on
    /// this node.
    @discardableResult
    public func publish(user: String, event: EventPolicy, payload: JSONValue, window: EmitWindow? = nil) -> Int {
        let audience = userAudience(user)
        let recoverable = broker.keepsHistory && event.isRecoverable && window == nil
        guard audience.recipients > 0 || recoverable || broker.crossesNodes else { return 0 }
        let message = makeMessage(event, payload, deflateClients: audience.clients.deflate)
        let routing = Routing(window: window)
        broker.publish(message.publication, to: .user(user), routing: routing, recoverable: recoverable) { [self] offset in
            if let window { return windows.hold(.user(user), message, routing: routing, window: window) }
            let stamped = withOffsetVariant(message.at(.user(user), offset), clients: audience.clients)
            let partitions = offset == nil ? audience.partitions : registry.connections(of: user).partitions
            deliver(user: user, stamped, partitions: partitions, skipMembersOf: nil, excludeConnection: nil)
        }
        return audience.recipients
    }

    /// Encodes an event once; compresses it once too when deflate clients are connected and
    /// it is over the threshold. Durable events (receipts) are never coalesced or dropped silently.
    func makeMessage(_ event: EventPolicy, _ payload: JSONValue, coalescingKey: CoalescingKey? = nil, deflateClients: Int) -> OutboundMessage {
        // The packet and its WebSocket frame are one buffer, made here once.
        let (packet, frame) = PreparedFrames.encodeEvent(event.name, payload)
        var message = OutboundMessage(bytes: packet, coalescingKey: coalescingKey, durable: event.isDurable)
        message.label = event.metricLabel
        message.createdAt = NIODeadline.now().uptimeNanoseconds
        if deflateClients > 0, packet.readableBytes >= deflateThresholdBytes {
            message.compressed = deflaters.compress(packet)
        }
        message.frames = PreparedFrames(plainFrame: frame, compressed: message.compressed)
        return message
    }

    /// Encodes a binary event once: the `45<n>-[…]` header and its attachments, never compressed.
    func makeBinaryMessage(_ event: EventPolicy, _ payload: JSONValue, attachments: [[UInt8]]) -> OutboundMessage {
        let encoded = BinaryPacket.event(name: event.name, payload: payload, attachments: attachments).encoded()
        let allocator = ByteBufferAllocator()
        var header = allocator.buffer(capacity: encoded.header.count)
        header.writeBytes(encoded.header)
        var message = OutboundMessage(bytes: header)
        message.attachments = encoded.attachments.map { bytes in
            var buffer = allocator.buffer(capacity: bytes.count)
            buffer.writeBytes(bytes)
            return buffer
        }
        message.label = event.metricLabel
        message.createdAt = NIODeadline.now().uptimeNanoseconds
        return message
    }

    /// Plans the bytes with the offset for a stamped message when sockets that take offsets are
    /// connected (compressed too when some of them negotiated deflate); made once, on first use.
    func withOffsetVariant(_ message: OutboundMessage, clients: ClientCounts.Snapshot) -> OutboundMessage {
        guard clients.offsets > 0, let stamp = message.stamp, stamp.plan == nil else { return message }
        var message = message
        // Only the plan here (this may run under the broker's stream lock): the variant, and
        // its compression, are made by the first socket that takes it, on its loop.
        let compress = clients.offsetsAndDeflate > 0 && message.attachments.isEmpty
        message.stamp = RecoveryStamp(
            position: stamp.position, plan: .init(compressAtLeast: compress ? deflateThresholdBytes : nil, deflaters: deflaters))
        return message
    }

    /// One hop per partition: inline for the caller's loop, posted to any other loop's inbox
    /// (one task per batch there). A stamped (recoverable) message is always posted, even to
    /// the caller's loop: inline delivery would overtake events of the stream already posted.
    ///
    /// The other loops get theirs first: an inline delivery to a large room's local half would
    /// otherwise keep the rest of the room waiting until it is done, on loops with nothing to do.
    func deliver(room: String, message: OutboundMessage, partitions: [Int], excludeConnection: ConnectionID?, excludeUser: String?) {
        let message = message.withFrames()
        let delivery = PartitionDelivery.room(room, message, excludeConnection: excludeConnection, excludeUser: excludeUser)
        if let local = postElsewhere(delivery, partitions: partitions, inline: message.stamp == nil) {
            local.deliver(room: room, message, excludeConnection: excludeConnection, excludeUser: excludeUser)
        }
    }

    /// One hop per partition to the user's sockets (those not in `skipMembersOf` and allowed it,
    /// for receipts).
    func deliver(
        user: String, _ message: OutboundMessage, partitions: [Int], skipMembersOf room: String?, allowedIn: String? = nil, excludeConnection: ConnectionID?
    ) {
        let message = message.withFrames()
        let delivery: PartitionDelivery =
            if let room {
                .userOutsideRoom(user, message, room: room, excludeConnection: excludeConnection)
            } else if let allowedIn {
                .userAllowedIn(user, message, room: allowedIn, excludeConnection: excludeConnection)
            } else {
                .user(user, message)
            }
        postElsewhere(delivery, partitions: partitions, inline: message.stamp == nil)?.perform(delivery)
    }

    /// Posts `delivery` to each partition's loop, except the caller's own when `inline` allows
    /// running it there: that partition is returned, for the caller to deliver to once every
    /// other loop has its delivery.
    private func postElsewhere(_ delivery: PartitionDelivery, partitions: [Int], inline: Bool) -> LoopPartition? {
        var local: LoopPartition?
        for p in partitions {
            let partition = loops[p]
            if inline && local == nil && partition.eventLoop.inEventLoop {
                local = partition
            } else if inline || !partition.keepInline(delivery) {
                partition.post(delivery)
            }
        }
        return local
    }

    /// The partition of the calling thread's loop, when it is one of the relay's.
    private func localPartition() -> LoopPartition? {
        loops.first { $0.eventLoop.inEventLoop }
    }

    // MARK: From other nodes

    /// An event another node published (or, with Redis, this node's own recoverable one, back
    /// from its channel with its offset): deliver to this node's sockets of the stream.
    public func received(_ publication: Publication, on stream: StreamKey, offset: StreamOffset?, routing: Routing) {
        let message = OutboundMessage(publication, at: offset.map { StreamPosition(stream: stream, offset: $0) })
        if let window = routing.window { return windows.hold(stream, message, routing: routing, window: window) }
        deliverHere(stream, message, routing: routing)
    }

    /// Delivers to this node's sockets of the stream now (an event from another node, a window
    /// that closed).
    func deliverHere(_ stream: StreamKey, _ message: OutboundMessage, routing: Routing) {
        var message = message
        message.createdAt = NIODeadline.now().uptimeNanoseconds
        // The sender's own socket (this node's own recoverable event, back from the channel).
        let exclude = message.origin.flatMap { registry.locate(sid: $0)?.0 }
        switch stream {
        case .room(let room):
            message = withOffsetVariant(message, clients: registry.clients.snapshot)
            deliver(room: room, message: message, partitions: rooms.partitions(room: room), excludeConnection: exclude, excludeUser: routing.excludeUser)
        case .user(let user):
            let audience = userAudience(user)
            message = withOffsetVariant(message, clients: audience.clients)
            deliver(
                user: user, message, partitions: audience.partitions, skipMembersOf: routing.skipMembersOf, allowedIn: routing.allowedIn,
                excludeConnection: exclude)
        }
    }
}
