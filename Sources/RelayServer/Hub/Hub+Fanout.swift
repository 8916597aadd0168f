import Logging
import NIOConcurrencyHelpers
import NIOCore
import RelayCore

/// Fan-out: encode once, publish once through the broker (which gives recoverable events their
/// offset), then one hop per loop; other nodes get the same bytes from the broker.
extension Hub {
    // MARK: Fan-out

    /// What one publish needs from the shared state, read under one lock acquisition.
    struct Audience {
        var partitions: [Int]
        var recipients: Int
        var deflateClients: Int
        var offsetClients: Int
        var offsetDeflateClients: Int
        /// The socket id of the excluded sender.
        var origin: String? = nil
    }

    /// What a publish to `room` needs: one lock, the room's shard. The counters are atomics; the
    /// excluded sender's sid is the caller's `origin` (a socket knows its own) or, when it did
    /// not give it, read from the connection's shard.
    func roomAudience(_ room: String, excludeConnection: ConnectionID?, origin: String?) -> Audience {
        var audience = roomShards.shard(for: room).withLockedValue { s in
            let count = s.rooms.memberCount(room: room)
            let excluded = excludeConnection.map { s.rooms.isMember(room: room, connection: $0) } ?? false
            return Audience(
                partitions: s.rooms.partitions(room: room), recipients: excluded ? count - 1 : count, deflateClients: 0,
                offsetClients: 0, offsetDeflateClients: 0)
        }
        audience.deflateClients = deflateClients.load(ordering: .relaxed)
        audience.offsetClients = offsetClients.load(ordering: .relaxed)
        audience.offsetDeflateClients = offsetDeflateClients.load(ordering: .relaxed)
        audience.origin = origin ?? excludeConnection.flatMap(sid(of:))
        return audience
    }

    /// The public socket id of a connection on this node.
    func sid(of connection: ConnectionID) -> String? {
        connectionShards.shard(for: connection).withLockedValue { $0.info[connection]?.sid }
    }

    /// Encodes an event once and delivers it to the room. Returns the number of recipients on
    /// this node (room members minus the excluded). `origin` is the excluded sender's sid, when
    /// the caller knows it.
    @discardableResult
    public func publish(
        room: String, name: String, payload: JSONValue, excludeConnection: ConnectionID? = nil, origin: String? = nil, excludeUser: String? = nil,
        coalesceKey: OutboundQueue<OutboundMessage>.CoalesceKey? = nil, durable: Bool = false, attachments: [[UInt8]] = [],
        coalesce: CoalesceRule? = nil
    ) -> Int {
        let audience = roomAudience(room, excludeConnection: excludeConnection, origin: origin)
        // Coalesced emits are superseded by the next one: never kept for recovery.
        let recoverable = broker.keepsHistory && EventPolicyTable.isRecoverable(name) && coalesce == nil
        // Nobody else in the room, nothing to keep and no other node to tell: do not even encode.
        guard audience.recipients > 0 || recoverable || broker.crossesNodes else { return 0 }
        var message = attachments.isEmpty
            ? makeMessage(name, payload, coalesceKey: coalesceKey, durable: durable, deflateClients: audience.deflateClients)
            : makeBinaryMessage(name, payload, attachments: attachments)
        message.origin = audience.origin
        let routing = Routing(excludeUser: excludeUser, coalesce: coalesce)
        broker.publish(message, to: .room(room), routing: routing, recoverable: recoverable) { [self] published in
            if let coalesce { return offerCoalesced(.room(room), published, routing: routing, rule: coalesce) }
            let message = withOffsetVariant(published, offsetClients: audience.offsetClients, deflate: audience.offsetDeflateClients)
            deliver(room: room, message: message, partitions: audience.partitions, excludeConnection: excludeConnection, excludeUser: excludeUser)
        }
        return audience.recipients
    }

    /// Encodes an event once; compresses it once too when deflate clients are connected and
    /// it is over the threshold.
    func makeMessage(_ name: String, _ payload: JSONValue, coalesceKey: OutboundQueue<OutboundMessage>.CoalesceKey? = nil, durable: Bool = false, deflateClients: Int) -> OutboundMessage {
        // The packet and its WebSocket frame are one buffer, made here once.
        let (packet, frame) = PreparedFrames.encodeEvent(name, payload)
        var message = OutboundMessage(bytes: packet, coalesceKey: coalesceKey, durable: durable)
        message.label = RelayMetrics.label(for: name)
        message.createdAt = NIODeadline.now().uptimeNanoseconds
        if deflateClients > 0, packet.readableBytes >= configuration.deflateThresholdBytes {
            message.compressed = deflaters.compress(packet)
        }
        message.frames = PreparedFrames(plainFrame: frame, compressed: message.compressed)
        return message
    }

    /// Encodes a binary event once: the `45<n>-[…]` header and its attachments, never compressed.
    func makeBinaryMessage(_ name: String, _ payload: JSONValue, attachments: [[UInt8]]) -> OutboundMessage {
        let encoded = BinaryPacket.event(name: name, payload: payload, attachments: attachments).encoded()
        let allocator = ByteBufferAllocator()
        var header = allocator.buffer(capacity: encoded.header.count)
        header.writeBytes(encoded.header)
        var message = OutboundMessage(bytes: header)
        message.attachments = encoded.attachments.map { bytes in
            var buffer = allocator.buffer(capacity: bytes.count)
            buffer.writeBytes(bytes)
            return buffer
        }
        message.label = RelayMetrics.label(for: name)
        message.createdAt = NIODeadline.now().uptimeNanoseconds
        return message
    }

    /// Adds the bytes with the offset to a stamped message, once, when sockets that take
    /// offsets are connected (compressed once too when some of them negotiated deflate).
    func withOffsetVariant(_ message: OutboundMessage, offsetClients: Int, deflate: Int) -> OutboundMessage {
        guard offsetClients > 0, let stamp = message.stamp, stamp.offsetMessage == nil,
            let bytes = RecoveryStamp.bytes(of: message.bytes, offset: stamp.position.wire)
        else { return message }
        var message = message
        let compressed = deflate > 0 && message.attachments.isEmpty && bytes.readableBytes >= configuration.deflateThresholdBytes ? deflaters.compress(bytes) : nil
        message.stamp = RecoveryStamp(position: stamp.position, of: message, bytes: bytes, compressed: compressed)
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
        let delivery = ShardDelivery.room(room, message, excludeConnection: excludeConnection, excludeUser: excludeUser)
        if let local = postElsewhere(delivery, partitions: partitions, inline: message.stamp == nil) {
            local.deliver(room: room, message, excludeConnection: excludeConnection, excludeUser: excludeUser)
        }
    }

    /// Posts `delivery` to each partition's loop, except the caller's own when `inline` allows
    /// running it there: that shard is returned, for the caller to deliver to once every other
    /// loop has its delivery.
    func postElsewhere(_ delivery: ShardDelivery, partitions: [Int], inline: Bool) -> LoopShard? {
        var local: LoopShard?
        for p in partitions {
            let shard = shards[p]
            if inline && local == nil && shard.eventLoop.inEventLoop {
                local = shard
            } else {
                shard.post(delivery)
            }
        }
        return local
    }

    /// The outbound-queue key the policy table declares for a server-made event.
    static func coalesceKey(_ name: String, room: String, user: String) -> OutboundQueue<OutboundMessage>.CoalesceKey? {
        EventPolicyTable.known[name]?.coalescingKey(room: room, user: user).map {
            OutboundQueue<OutboundMessage>.CoalesceKey(event: $0.event, room: $0.room, user: $0.user)
        }
    }

    /// Delivers an event to every connected device of `user`. Returns the number of sockets on
    /// this node.
    @discardableResult
    public func publish(user: String, name: String, payload: JSONValue, durable: Bool = false, coalesce: CoalesceRule? = nil) -> Int {
        let audience = userAudience(user)
        let recoverable = broker.keepsHistory && EventPolicyTable.isRecoverable(name) && coalesce == nil
        guard audience.recipients > 0 || recoverable || broker.crossesNodes else { return 0 }
        let message = makeMessage(name, payload, durable: durable, deflateClients: audience.deflateClients)
        let routing = Routing(coalesce: coalesce)
        broker.publish(message, to: .user(user), routing: routing, recoverable: recoverable) { [self] published in
            if let coalesce { return offerCoalesced(.user(user), published, routing: routing, rule: coalesce) }
            let message = withOffsetVariant(published, offsetClients: audience.offsetClients, deflate: audience.offsetDeflateClients)
            deliver(user: user, message, partitions: audience.partitions, skipMembersOf: nil, excludeConnection: nil)
        }
        return audience.recipients
    }

    func userAudience(_ user: String) -> Audience {
        let (partitions, recipients) = userShards.shard(for: user).withLockedValue { s in (s.directory.partitions(of: user), s.directory.connections(of: user).count) }
        return Audience(
            partitions: partitions, recipients: recipients, deflateClients: deflateClients.load(ordering: .relaxed),
            offsetClients: offsetClients.load(ordering: .relaxed), offsetDeflateClients: offsetDeflateClients.load(ordering: .relaxed))
    }

    /// One hop per partition to the user's sockets (those not in `skipMembersOf` and allowed it,
    /// for receipts).
    func deliver(user: String, _ message: OutboundMessage, partitions: [Int], skipMembersOf room: String?, excludeConnection: ConnectionID?) {
        let message = message.withFrames()
        let delivery: ShardDelivery =
            if let room {
                .userOutsideRoom(user, message, room: room, excludeConnection: excludeConnection)
            } else {
                .user(user, message)
            }
        postElsewhere(delivery, partitions: partitions, inline: message.stamp == nil)?.perform(delivery)
    }

    /// Forwards a committed receipt to its room and to the devices of the message's author
    /// whose token allows the room, the author's devices outside the room included (each
    /// socket gets it once): one publish to the room's stream, one to the author's. The author
    /// id is the sender's claim: a device that may not see the room never gets it.
    public func publishReceipt(_ receipt: Receipt, excludeConnection: ConnectionID?) {
        webhooks?.clientEvent(name: receipt.kind.eventName, room: receipt.room, from: receipt.userID, payload: receipt.json, ts: receipt.ts)
        let room = roomAudience(receipt.room, excludeConnection: excludeConnection, origin: nil)
        let author = userAudience(receipt.authorID)
        let recoverable = broker.keepsHistory
        // Nobody else in the room and the author offline (and no history, no other node).
        if author.recipients == 0 && room.recipients == 0 && !recoverable && !broker.crossesNodes { return }
        let payload = receipt.json.setting("from", to: .string(receipt.userID))
        // Durable as the policy table declares receipts: never coalesced or dropped silently.
        let durable = EventPolicyTable.known[receipt.kind.eventName]?.isDurable ?? true
        var message = makeMessage(receipt.kind.eventName, payload, durable: durable, deflateClients: room.deflateClients)
        message.origin = room.origin
        broker.publish(message, to: .room(receipt.room), routing: Routing(), recoverable: recoverable) { [self] published in
            let message = withOffsetVariant(published, offsetClients: room.offsetClients, deflate: room.offsetDeflateClients)
            deliver(room: receipt.room, message: message, partitions: room.partitions, excludeConnection: excludeConnection, excludeUser: nil)
        }
        var authorMessage = message
        authorMessage.skipMembersOf = receipt.room
        broker.publish(authorMessage, to: .user(receipt.authorID), routing: Routing(skipMembersOf: receipt.room), recoverable: recoverable) { [self] published in
            let message = withOffsetVariant(published, offsetClients: author.offsetClients, deflate: author.offsetDeflateClients)
            deliver(user: receipt.authorID, message, partitions: author.partitions, skipMembersOf: receipt.room, excludeConnection: excludeConnection)
        }
    }

    // MARK: From other nodes

    /// An event another node published: deliver to this node's sockets of the stream.
    func deliverFromCluster(_ stream: StreamKey, _ message: OutboundMessage, routing: Routing) {
        if let rule = routing.coalesce { return offerCoalesced(stream, message, routing: routing, rule: rule) }
        var message = message
        message.createdAt = NIODeadline.now().uptimeNanoseconds
        // The sender's own socket (this node's own recoverable event, back from the channel).
        let exclude = message.origin.flatMap { sid in sidShards.shard(for: sid).withLockedValue { $0[sid]?.0 } }
        switch stream {
        case .room(let room):
            let partitions = roomShards.shard(for: room).withLockedValue { $0.rooms.partitions(room: room) }
            message = withOffsetVariant(message, offsetClients: offsetClients.load(ordering: .relaxed), deflate: offsetDeflateClients.load(ordering: .relaxed))
            deliver(room: room, message: message, partitions: partitions, excludeConnection: exclude, excludeUser: routing.excludeUser)
        case .user(let user):
            let audience = userAudience(user)
            message = withOffsetVariant(message, offsetClients: audience.offsetClients, deflate: audience.offsetDeflateClients)
            deliver(user: user, message, partitions: audience.partitions, skipMembersOf: routing.skipMembersOf, excludeConnection: exclude)
        }
    }
}

extension Hub {
    /// Forwards committed receipts of one batch, grouped: one `{room, from, items}` event to the
    /// room, and to each author's devices outside the room (and allowed it) the items of that
    /// author's messages.
    public func publishReceipts(_ receipts: [Receipt], room: String, kind: ReceiptKind, from user: String, excludeConnection: ConnectionID?) {
        let byAuthor = Dictionary(grouping: receipts, by: \.authorID)
        // Every member counts here (the excluded sender included); its sid is still the origin.
        let roomAudience = roomAudience(room, excludeConnection: nil, origin: excludeConnection.flatMap(sid(of:)))
        let authors = byAuthor.keys.map { author -> (String, [Int]) in
            (author, userShards.shard(for: author).withLockedValue { $0.directory.partitions(of: author) })
        }
        let durable = EventPolicyTable.known[kind.eventName]?.isDurable ?? true
        let recoverable = broker.keepsHistory
        func payload(_ items: [Receipt]) -> JSONValue {
            .object([("room", .string(room)), ("from", .string(user)), ("kind", .string(kind.rawValue)), ("items", .array(items.map(\.json)))])
        }
        var roomMessage = makeMessage(kind.eventName, payload(receipts), durable: durable, deflateClients: roomAudience.deflateClients)
        roomMessage.origin = roomAudience.origin
        broker.publish(roomMessage, to: .room(room), routing: Routing(), recoverable: recoverable) { [self] published in
            let message = withOffsetVariant(published, offsetClients: roomAudience.offsetClients, deflate: roomAudience.offsetDeflateClients)
            deliver(room: room, message: message, partitions: roomAudience.partitions, excludeConnection: excludeConnection, excludeUser: nil)
        }
        for (author, partitions) in authors {
            var message = makeMessage(kind.eventName, payload(byAuthor[author] ?? []), durable: durable, deflateClients: roomAudience.deflateClients)
            message.origin = roomAudience.origin
            message.skipMembersOf = room
            broker.publish(message, to: .user(author), routing: Routing(skipMembersOf: room), recoverable: recoverable) { [self] published in
                let message = withOffsetVariant(published, offsetClients: roomAudience.offsetClients, deflate: roomAudience.offsetDeflateClients)
                deliver(user: author, message, partitions: partitions, skipMembersOf: room, excludeConnection: excludeConnection)
            }
        }
    }
}
