import NIOCore
import RelayCore

/// Runs one typed client event of a connected socket against the `Hub` (routed by
/// `ClientEvent`, never by matching names again). Every event with an ack id gets exactly one
/// reply, through `SocketSession.reply`: at once, or when what it waits for completes.
struct ClientEventExecutor {
    let socket: SocketSession
    /// The socket's user, as the session knows it when the event arrived.
    let user: AuthenticatedUser

    private var hub: Hub { socket.hub }

    /// Runs `event`; its ack (or error reply) now, or later for events that wait.
    func run(_ event: ClientEvent, ackID: Int64?) {
        do throws(RelayError) {
            if let payload = try execute(event, ackID: ackID), let ackID {
                socket.reply(.ack(id: ackID, payload: payload))
            }
        } catch {
            socket.reply(.failure(error, event: event.name, ackID: ackID))
        }
    }

    /// Returns the ack payload, or `nil` when the ack is sent later (or not wanted).
    private func execute(_ event: ClientEvent, ackID: Int64?) throws(RelayError) -> JSONValue? {
        let partition = socket.partition
        let connectionID = socket.connectionID
        let ok = JSONValue.object([("ok", true)])
        switch event {
        case .join(let room):
            guard user.rooms.allows(room) else { throw RelayError(.roomNotAuthorized, "your token does not allow \(room)") }
            let alreadyMember = hub.rooms.isMember(room: room, connection: connectionID)
            let presence = try hub.join(room: room, sink: socket, user: user.userID, on: partition)
            // Acked once this node receives the room's events (and its offset is read after that).
            let broker = hub.backends.broker, loop = socket.eventLoop
            let head = broker.whenSubscribed(.room(room), on: loop).recover { _ in }.flatMap { broker.head(of: .room(room), on: loop) }
            let bound = NIOLoopBound(socket, eventLoop: loop)
            let reply = presence.and(head).map { presence, head -> JSONValue in
                if !alreadyMember { bound.value.connectState.join(.room(room), at: head) }
                return .object([
                    ("ok", true), ("room", .string(room)), ("presence", .array(presence.map(\.json))),
                    ("offset", .string(WireOffset(head, stream: .room(room)).description)),
                ])
            }
            ackLater(reply, ackID: ackID, event: event.name)
            return nil
        case .leave(let room):
            guard hub.leave(room: room, connection: connectionID, on: partition) else { throw RelayError(.notInRoom) }
            socket.connectState.unfollow(.room(room))
            return ok
        case .presence(let room):
            guard DeliveryGate.admits(user, room: room, member: hub.rooms.isMember(room: room, connection: connectionID)) else {
                throw RelayError(.roomNotAuthorized, "your token does not allow \(room)")
            }
            ackLater(hub.presence.presence(room: room, on: partition.eventLoop).map { .object([("ok", true), ("room", .string(room)), ("presence", .array($0.map(\.json)))]) }, ackID: ackID, event: event.name)
            return nil
        case .typing(let room, let isTyping):
            try requireMember(room)
            hub.typing.change(isTyping, room: room, user: user.userID, connection: connectionID)
            return ok
        case .reaction(let b), .custom(let b):
            try requireMember(b.room)
            broadcast(b)
            return ok
        case .shareLive(let b, let duration):
            try requireMember(b.room)
            try hub.locations.start(room: b.room, user: user.userID, connection: connectionID, durationSec: duration)
            broadcast(b)
            return ok
        case .locationUpdate(let b):
            try requireMember(b.room)
            try hub.locations.check(room: b.room, user: user.userID)
            broadcast(b)
            return ok
        case .locationStop(let b):
            try requireMember(b.room)
            guard hub.locations.stop(room: b.room, user: user.userID) else { throw RelayError(.noLiveShare) }
            broadcast(b)
            return ok
        case .receipt(let receipt):
            try socket.receipts.record(receipt, ackID: ackID, user: user, for: socket)
            return nil
        case .receiptBatch(let room, let kind, let receipts):
            try socket.receipts.record(batch: receipts, room: room, kind: kind, ackID: ackID, user: user, for: socket)
            return nil
        case .receiptSync(let since, let limit):
            try socket.receipts.sync(since: since, limit: limit, ackID: ackID, user: user, for: socket)
            return nil
        case .authRefresh(let token):
            TokenRefresh(socket: socket).refresh(with: token, ackID: ackID, current: user)
            return nil
        case .roomSync(let room, let offset, let limit):
            guard DeliveryGate.admits(user, room: room, member: hub.rooms.isMember(room: room, connection: connectionID)) else {
                throw RelayError(.roomNotAuthorized, "your token does not allow \(room)")
            }
            RoomSync(socket: socket).sync(room, after: offset, limit: limit, ackID: ackID)
            return nil
        }
    }

    /// Sends the ack when `reply` completes (on this connection's loop).
    private func ackLater(_ reply: EventLoopFuture<JSONValue>, ackID: Int64?, event: String) {
        guard let ackID else { return }
        let bound = NIOLoopBound(socket, eventLoop: socket.eventLoop)
        reply.whenComplete { result in
            switch result {
            case .success(let payload): bound.value.reply(.ack(id: ackID, payload: payload))
            case .failure: bound.value.reply(.failure(RelayError(.internalError), event: event, ackID: ackID))
            }
        }
    }

    /// Events about a room need membership of it.
    private func requireMember(_ room: String) throws(RelayError) {
        guard hub.rooms.isMember(room: room, connection: socket.connectionID) else { throw RelayError(.notInRoom, "join \(room) first") }
    }

    /// Stamps `from`/`ts` and fans out to the room minus this socket, with the coalescing key
    /// the policy table declares.
    private func broadcast(_ b: ClientEvent.Broadcast) {
        let stamped = EventValidator.stamp(b.payload, from: user.userID, ts: hub.clock.wallMs())
        hub.publisher.publish(
            room: b.room, event: b.policy, payload: stamped, excludeConnection: socket.connectionID, origin: socket.sid,
            coalescingKey: b.coalescingKey, attachments: b.attachments)
        hub.backends.webhooks?.clientEvent(name: b.name, room: b.room, from: user.userID, payload: stamped, ts: stamped["ts"]?.intValue ?? hub.clock.wallMs())
    }
}
