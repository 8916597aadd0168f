import NIOCore
import RelayCore

/// Runs one typed client event of a connected socket (routed by `ClientEvent`, never by
/// matching names again) against the services it is given. Every event with an ack id gets
/// exactly one reply, which the executor returns — at once, or as a future for events that
/// wait — and the socket writes (`ClientSession.carryOut`); the executor never writes to the
/// socket or changes it.
struct ClientEventExecutor {
    let services: EventServices
    /// The socket the event came from, read for its id, loop and sid.
    let socket: ClientSession
    /// The socket's user, as the session knows it when the event arrived.
    let user: AuthenticatedUser

    /// Runs `event`; its ack (or error reply) now, or later for events that wait.
    func run(_ event: ClientEvent, ackID: Int64?) -> HandlerResult {
        do throws(RelayError) {
            return try execute(event, ackID: ackID)
        } catch {
            return .reply(.failure(error, event: event.name, ackID: ackID))
        }
    }

    /// The ack `{"ok":true}`, when one is wanted.
    private func ok(_ ackID: Int64?) -> HandlerResult {
        .reply(ackID.map { .ack(id: $0, payload: .object([("ok", true)])) })
    }

    private func execute(_ event: ClientEvent, ackID: Int64?) throws(RelayError) -> HandlerResult {
        let connectionID = socket.connectionID
        switch event {
        case .join(let room):
            guard user.rooms.allows(room) else { throw RelayError(.roomNotAuthorized, "your token does not allow \(room)") }
            return try join(room, ackID: ackID, event: event.name)
        case .leave(let room):
            guard services.membership.leave(room: room, connection: connectionID, on: socket.partition) else { throw RelayError(.notInRoom) }
            var update = SocketUpdate(changes: [.left(.room(room))])
            update.reply = ackID.map { .ack(id: $0, payload: .object([("ok", true)])) }
            return .now(update)
        case .presence(let room):
            guard DeliveryGate.admits(user, room: room, member: services.membership.isMember(room: room, connection: connectionID)) else {
                throw RelayError(.roomNotAuthorized, "your token does not allow \(room)")
            }
            let presence = services.presence.presence(room: room, on: socket.eventLoop).map { entries -> JSONValue in
                .object([("ok", true), ("room", .string(room)), ("presence", .array(entries.map(\.json)))])
            }
            return later(presence, ackID: ackID, event: event.name)
        case .typing(let room, let isTyping):
            try requireMember(room)
            services.typing.change(isTyping, room: room, user: user.userID, connection: connectionID)
            return ok(ackID)
        case .reaction(let b), .custom(let b):
            try requireMember(b.room)
            broadcast(b)
            return ok(ackID)
        case .shareLive(let b, let duration):
            try requireMember(b.room)
            try services.locations.start(room: b.room, user: user.userID, connection: connectionID, durationSec: duration)
            broadcast(b)
            return ok(ackID)
        case .locationUpdate(let b):
            try requireMember(b.room)
            try services.locations.check(room: b.room, user: user.userID)
            broadcast(b)
            return ok(ackID)
        case .locationStop(let b):
            try requireMember(b.room)
            guard services.locations.stop(room: b.room, user: user.userID) else { throw RelayError(.noLiveShare) }
            broadcast(b)
            return ok(ackID)
        case .receipt(let receipt):
            return try socket.receipts.record(receipt, ackID: ackID, user: user, for: socket)
        case .receiptBatch(let room, let kind, let receipts):
            return try socket.receipts.record(batch: receipts, room: room, kind: kind, ackID: ackID, user: user, for: socket)
        case .receiptSync(let since, let limit):
            return try socket.receipts.sync(since: since, limit: limit, ackID: ackID, user: user, for: socket)
        case .authRefresh(let token):
            return TokenRefresh(services: services, socket: socket).refresh(with: token, ackID: ackID, current: user)
        case .roomSync(let room, let offset, let limit):
            guard DeliveryGate.admits(user, room: room, member: services.membership.isMember(room: room, connection: connectionID)) else {
                throw RelayError(.roomNotAuthorized, "your token does not allow \(room)")
            }
            return RoomSync(services: services, loop: socket.eventLoop).sync(room, after: offset, limit: limit, ackID: ackID)
        }
    }

    /// `room:join`: acked once this node receives the room's events, with the room's offset
    /// read after that, so the offset and the live events that follow it meet exactly.
    private func join(_ room: String, ackID: Int64?, event: String) throws(RelayError) -> HandlerResult {
        let alreadyMember = services.membership.isMember(room: room, connection: socket.connectionID)
        let presence = try services.membership.join(room: room, sink: socket, user: user.userID, on: socket.partition)
        let broker = services.broker, loop = socket.eventLoop
        let head = broker.whenSubscribed(.room(room), on: loop).recover { _ in }.flatMap { broker.head(of: .room(room), on: loop) }
        let update = presence.and(head).map { presence, head -> SocketUpdate in
            let payload = JSONValue.object([
                ("ok", true), ("room", .string(room)), ("presence", .array(presence.map(\.json))),
                ("offset", .string(WireOffset(head, stream: .room(room)).description)),
            ])
            return SocketUpdate(reply: ackID.map { .ack(id: $0, payload: payload) }, changes: alreadyMember ? [] : [.joined(.room(room), head: head)])
        }.recover { _ in
            SocketUpdate(reply: ackID.map { .failure(RelayError(.internalError), event: event, ackID: $0) })
        }
        return .later(update)
    }

    /// The ack when `payload` completes; an internal error when it fails.
    private func later(_ payload: EventLoopFuture<JSONValue>, ackID: Int64?, event: String) -> HandlerResult {
        guard let ackID else { return .nothing }
        return .later(
            payload.map { SocketUpdate(reply: .ack(id: ackID, payload: $0)) }
                .recover { _ in SocketUpdate(reply: .failure(RelayError(.internalError), event: event, ackID: ackID)) })
    }

    /// Events about a room need membership of it.
    private func requireMember(_ room: String) throws(RelayError) {
        guard services.membership.isMember(room: room, connection: socket.connectionID) else { throw RelayError(.notInRoom, "join \(room) first") }
    }

    /// Stamps `from`/`ts` and fans out to the room minus this socket, with the coalescing key
    /// the policy table declares.
    private func broadcast(_ b: ClientEvent.Broadcast) {
        let now = services.clock.wallMs()
        let stamped = EventValidator.stamp(b.payload, from: user.userID, ts: now)
        services.publisher.publish(
            room: b.room, event: b.policy, payload: stamped, excludeConnection: socket.connectionID, origin: socket.sid,
            coalescingKey: b.coalescingKey, attachments: b.attachments)
        services.webhooks?.clientEvent(name: b.name, room: b.room, from: user.userID, payload: stamped, ts: stamped["ts"]?.intValue ?? now)
    }
}
