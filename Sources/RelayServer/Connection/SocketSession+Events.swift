import Logging
import NIOCore
import RelayCore

/// What the session asks of the server: authentication, then typed client events executed
/// against the `Hub` (routed by `ClientEvent`, never by matching names again).
extension SocketSession {
    // MARK: CONNECT

    /// Verifies the token (after the per-IP failed-authentication budget), then recovers the
    /// session or starts a new one (`SocketSession+Recovery`).
    func authenticate(_ request: ConnectRequest) {
        let now = hub.clock.monotonicMs()
        guard relay.admission.mayAuthenticate(ip: handshake.remoteIP, now: now) else {
            hub.metrics.authFailure(.authRateLimited)
            hub.metrics.connectsRefused.increment()
            perform(session.connectFinished(.failure(RelayError(.authRateLimited)), now: now))
            return
        }
        let eventLoop = self.eventLoop
        let handler = NIOLoopBound(self, eventLoop: eventLoop)
        relay.authenticate(request.token, eventLoop).whenSuccess { result in
            handler.value.authenticationCompleted(result, request: request)
        }
    }

    private func authenticationCompleted(_ result: Result<AuthenticatedUser, RelayError>, request: ConnectRequest) {
        guard session.phase == .authenticating, !closing else { return }
        let now = hub.clock.monotonicMs()
        switch result {
        case .failure(let error):
            relay.admission.recordAuthFailure(ip: handshake.remoteIP, now: now)
            hub.metrics.authFailure(error.code)
            hub.metrics.connectsRefused.increment()
            relay.logger.info("auth failed", metadata: ["ip": "\(handshake.remoteIP)", "code": "\(error.code.rawValue)"])
            perform(session.connectFinished(.failure(error), now: now))
        case .success(let user):
            guard !hub.isRevoked(user) else {
                hub.metrics.authFailure(.tokenRevoked)
                hub.metrics.connectsRefused.increment()
                perform(session.connectFinished(.failure(RelayError(.tokenRevoked)), now: now))
                return
            }
            connect(user, request: request)
        }
    }

    /// Registers with the hub; `false` (and the CONNECT refused) when a limit says no.
    func register(_ user: AuthenticatedUser, sid: String) -> Bool {
        guard let shard else { return false }
        do throws(RelayError) {
            try hub.register(self, sid: sid, user: user.userID, on: shard, deflate: handshake.deflate != nil, ip: handshake.remoteIP, takesOffsets: takesOffsets)
        } catch {
            hub.metrics.authFailure(error.code)
            hub.metrics.connectsRefused.increment()
            holding = nil
            perform(session.connectFinished(.failure(error), now: hub.clock.monotonicMs()))
            return false
        }
        registeredUser = user
        hub.metrics.connectsOK.increment()
        authenticated()
        return true
    }

    // MARK: Events

    /// Runs one typed client event; every event with an ack id gets exactly one ack.
    func handle(_ event: ClientEvent, ackID: Int64?, user: AuthenticatedUser) {
        do throws(RelayError) {
            if let payload = try execute(event, ackID: ackID, user: user), let ackID {
                reply(.ack(id: ackID, payload: payload))
            }
        } catch {
            reply(.failure(error, event: event.name, ackID: ackID))
        }
    }

    /// Returns the ack payload, or `nil` when the ack is sent later (or not wanted).
    private func execute(_ event: ClientEvent, ackID: Int64?, user: AuthenticatedUser) throws(RelayError) -> JSONValue? {
        guard let shard else { throw RelayError(.internalError) }
        let ok = JSONValue.object([("ok", true)])
        switch event {
        case .join(let room):
            guard user.rooms.allows(room) else { throw RelayError(.roomNotAuthorized, "your token does not allow \(room)") }
            let alreadyMember = hub.isMember(room: room, connection: connectionID)
            let presence = try hub.join(room: room, sink: self, user: user.userID, on: shard)
            // Acked once this node receives the room's events (and its offset is read after that).
            let broker = hub.broker, loop = eventLoop
            let head = broker.whenSubscribed(.room(room), on: loop).recover { _ in }.flatMap { broker.head(of: .room(room), on: loop) }
            let handler = NIOLoopBound(self, eventLoop: eventLoop)
            let reply = presence.and(head).map { presence, head -> JSONValue in
                if !alreadyMember { handler.value.follow(.room(room), from: head) }
                return .object([
                    ("ok", true), ("room", .string(room)), ("presence", .array(presence.map(\.json))),
                    ("offset", .string(WireOffset(head, stream: .room(room)).description)),
                ])
            }
            ackLater(reply, ackID: ackID, event: event.name)
            return nil
        case .leave(let room):
            guard hub.leave(room: room, connection: connectionID, on: shard) else { throw RelayError(.notInRoom) }
            recoveryLog.unfollow(.room(room))
            return ok
        case .presence(let room):
            guard user.rooms.allows(room) || hub.isMember(room: room, connection: connectionID) else {
                throw RelayError(.roomNotAuthorized, "your token does not allow \(room)")
            }
            ackLater(hub.presence(room: room, on: shard.eventLoop).map { .object([("ok", true), ("room", .string(room)), ("presence", .array($0.map(\.json)))]) }, ackID: ackID, event: event.name)
            return nil
        case .typing(let room, let isTyping):
            try requireMember(room)
            hub.typing(isTyping, room: room, user: user.userID, connection: connectionID)
            return ok
        case .reaction(let b), .custom(let b):
            try requireMember(b.room)
            broadcast(b, user: user)
            return ok
        case .shareLive(let b, let duration):
            try requireMember(b.room)
            try hub.startLiveShare(room: b.room, user: user.userID, connection: connectionID, durationSec: duration)
            broadcast(b, user: user)
            return ok
        case .locationUpdate(let b):
            try requireMember(b.room)
            try hub.checkLiveShare(room: b.room, user: user.userID)
            broadcast(b, user: user)
            return ok
        case .locationStop(let b):
            try requireMember(b.room)
            guard hub.stopLiveShare(room: b.room, user: user.userID) else { throw RelayError(.noLiveShare) }
            broadcast(b, user: user)
            return ok
        case .receipt(let receipt):
            try record(receipt, ackID: ackID, user: user)
            return nil
        case .receiptBatch(let room, let kind, let receipts):
            try record(batch: receipts, room: room, kind: kind, ackID: ackID, user: user)
            return nil
        case .receiptSync(let since, let limit):
            try sync(since: since, limit: limit, ackID: ackID, user: user)
            return nil
        case .authRefresh(let token):
            refresh(with: token, ackID: ackID, current: user)
            return nil
        case .roomSync(let room, let offset, let limit):
            guard user.rooms.allows(room) || hub.isMember(room: room, connection: connectionID) else {
                throw RelayError(.roomNotAuthorized, "your token does not allow \(room)")
            }
            syncRoom(room, after: offset, limit: limit, ackID: ackID)
            return nil
        }
    }

    /// Sends the ack when `reply` completes (on this connection's loop).
    func ackLater(_ reply: EventLoopFuture<JSONValue>, ackID: Int64?, event: String) {
        guard let ackID else { return }
        let handler = NIOLoopBound(self, eventLoop: eventLoop)
        reply.whenComplete { result in
            let h = handler.value
            switch result {
            case .success(let payload): h.reply(.ack(id: ackID, payload: payload))
            case .failure: h.reply(.failure(RelayError(.internalError), event: event, ackID: ackID))
            }
        }
    }

    /// Events about a room need membership of it.
    private func requireMember(_ room: String) throws(RelayError) {
        guard hub.isMember(room: room, connection: connectionID) else { throw RelayError(.notInRoom, "join \(room) first") }
    }

    /// Stamps `from`/`ts` and fans out to the room minus this socket, with the coalescing key
    /// the policy table declares.
    private func broadcast(_ b: ClientEvent.Broadcast, user: AuthenticatedUser) {
        let stamped = EventValidator.stamp(b.payload, from: user.userID, ts: hub.clock.wallMs())
        let key = b.coalescingKey.map { OutboundQueue<OutboundMessage>.CoalesceKey(event: $0.event, room: $0.room, user: $0.user) }
        hub.publish(room: b.room, name: b.name, payload: stamped, excludeConnection: connectionID, origin: sid, coalesceKey: key, attachments: b.attachments)
        hub.webhooks?.clientEvent(name: b.name, room: b.room, from: user.userID, payload: stamped, ts: stamped["ts"]?.intValue ?? hub.clock.wallMs())
    }
}
