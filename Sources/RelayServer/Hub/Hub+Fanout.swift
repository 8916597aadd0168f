import Logging
import NIOConcurrencyHelpers
import NIOCore
import RelayCore

/// Fan-out: encode once, one hop per loop, and the same bytes to other nodes.
extension Hub {
    // MARK: Fan-out

    /// Encodes an event once and delivers it to the room. Returns the number of recipients
    /// (room members minus the excluded).
    @discardableResult
    public func publish(
        room: String, name: String, payload: JSONValue, excludeConnection: ConnectionID? = nil, excludeUser: String? = nil,
        coalesceKey: OutboundQueue<OutboundMessage>.CoalesceKey? = nil, durable: Bool = false, attachments: [[UInt8]] = []
    ) -> Int {
        let (partitions, others, deflateClients) = state.withLockedValue { s in
            let count = s.rooms.memberCount(room: room)
            let excluded = excludeConnection.map { s.rooms.isMember(room: room, connection: $0) } ?? false
            return (s.rooms.partitions(room: room), excluded ? count - 1 : count, s.deflateClients)
        }
        // Nobody else in the room (and no other node to tell): do not even encode.
        guard others > 0 || cluster != nil else { return 0 }
        let message = attachments.isEmpty
            ? makeMessage(name, payload, coalesceKey: coalesceKey, durable: durable, deflateClients: deflateClients)
            : makeBinaryMessage(name, payload, attachments: attachments)
        deliver(room: room, message: message, partitions: partitions, excludeConnection: excludeConnection, excludeUser: excludeUser)
        cluster?.publish(room: room, message, excludeUser: excludeUser)
        return others
    }

    /// Encodes an event once; compresses it once too when deflate clients are connected and
    /// it is over the threshold.
    func makeMessage(_ name: String, _ payload: JSONValue, coalesceKey: OutboundQueue<OutboundMessage>.CoalesceKey? = nil, durable: Bool = false, deflateClients: Int) -> OutboundMessage {
        var message = OutboundMessage(bytes: OutboundMessage.event(name, payload), coalesceKey: coalesceKey, durable: durable)
        message.label = RelayMetrics.label(for: name)
        message.createdAt = NIODeadline.now().uptimeNanoseconds
        if deflateClients > 0, message.bytes.readableBytes >= configuration.deflateThresholdBytes {
            message.compressed = deflaters.compress(message.bytes)
        }
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

    /// One hop per partition: inline for the caller's loop, one `execute` for any other.
    func deliver(room: String, message: OutboundMessage, partitions: [Int], excludeConnection: ConnectionID?, excludeUser: String?) {
        for p in partitions {
            let shard = shards[p]
            if shard.eventLoop.inEventLoop {
                shard.deliver(room: room, message, excludeConnection: excludeConnection, excludeUser: excludeUser)
            } else {
                shard.eventLoop.execute {
                    shard.deliver(room: room, message, excludeConnection: excludeConnection, excludeUser: excludeUser)
                }
            }
        }
    }

    /// The outbound-queue key the policy table declares for a server-made event.
    static func coalesceKey(_ name: String, room: String, user: String) -> OutboundQueue<OutboundMessage>.CoalesceKey? {
        EventPolicyTable.known[name]?.coalescingKey(room: room, user: user).map {
            OutboundQueue<OutboundMessage>.CoalesceKey(event: $0.event, room: $0.room, user: $0.user)
        }
    }

    /// Delivers an event to every connected device of `user`. Returns the number of sockets.
    @discardableResult
    public func publish(user: String, name: String, payload: JSONValue, durable: Bool = false) -> Int {
        let (partitions, count, deflateClients) = state.withLockedValue { s in
            (s.directory.partitions(of: user), s.directory.connections(of: user).count, s.deflateClients)
        }
        guard count > 0 || cluster != nil else { return 0 }
        let message = makeMessage(name, payload, durable: durable, deflateClients: deflateClients)
        cluster?.publish(user: user, message)
        for p in partitions {
            let shard = shards[p]
            if shard.eventLoop.inEventLoop {
                shard.deliver(user: user, message)
            } else {
                shard.eventLoop.execute { shard.deliver(user: user, message) }
            }
        }
        return count
    }

    /// Forwards a committed receipt to its room and to the devices of the message's author
    /// whose token allows the room, the author's devices outside the room included (each
    /// socket gets it once). The author id is the sender's claim: a device that may not see
    /// the room never gets it.
    public func publishReceipt(_ receipt: Receipt, excludeConnection: ConnectionID?) {
        let (roomPartitions, others, authorPartitions, deflateClients) = state.withLockedValue { s in
            let count = s.rooms.memberCount(room: receipt.room)
            let excluded = excludeConnection.map { s.rooms.isMember(room: receipt.room, connection: $0) } ?? false
            return (s.rooms.partitions(room: receipt.room), excluded ? count - 1 : count, s.directory.partitions(of: receipt.authorID), s.deflateClients)
        }
        // Nobody else in the room and the author offline (and no other node): nothing to encode.
        if authorPartitions.isEmpty && others == 0 && cluster == nil { return }
        let payload = receipt.json.setting("from", to: .string(receipt.userID))
        // Durable as the policy table declares receipts: never coalesced or dropped silently.
        let durable = EventPolicyTable.known[receipt.kind.eventName]?.isDurable ?? true
        let message = makeMessage(receipt.kind.eventName, payload, durable: durable, deflateClients: deflateClients)
        cluster?.publish(room: receipt.room, message, excludeUser: nil)
        cluster?.publish(user: receipt.authorID, message, skipMembersOf: receipt.room)
        for p in Set(roomPartitions).union(authorPartitions).sorted() {
            let shard = shards[p]
            let deliver: @Sendable () -> Void = {
                shard.deliver(room: receipt.room, message, excludeConnection: excludeConnection, excludeUser: nil)
                shard.deliver(user: receipt.authorID, message, skippingMembersOf: receipt.room, excludeConnection: excludeConnection)
            }
            if shard.eventLoop.inEventLoop { deliver() } else { shard.eventLoop.execute(deliver) }
        }
    }

    // MARK: From other nodes

    /// An event another node published to a room: deliver to this node's members.
    func deliverFromCluster(room: String, _ message: OutboundMessage, excludeUser: String?) {
        let partitions = state.withLockedValue { $0.rooms.partitions(room: room) }
        var message = message
        message.createdAt = NIODeadline.now().uptimeNanoseconds
        deliver(room: room, message: message, partitions: partitions, excludeConnection: nil, excludeUser: excludeUser)
    }

    /// An event another node published to a user: deliver to the user's sockets here.
    func deliverFromCluster(user: String, _ message: OutboundMessage, skipMembersOf room: String?) {
        let partitions = state.withLockedValue { $0.directory.partitions(of: user) }
        for p in partitions {
            let shard = shards[p]
            let deliver: @Sendable () -> Void = {
                if let room { shard.deliver(user: user, message, skippingMembersOf: room, excludeConnection: nil) } else { shard.deliver(user: user, message) }
            }
            if shard.eventLoop.inEventLoop { deliver() } else { shard.eventLoop.execute(deliver) }
        }
    }
}
