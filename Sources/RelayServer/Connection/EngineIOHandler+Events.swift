import Logging
import NIOCore
import RelayCore

/// The Socket.IO layer of a session: CONNECT and authentication, then event dispatch.
extension EngineIOHandler {
    func handleSocketPacket(_ payload: ArraySlice<UInt8>, size: Int) {
        let packet: SocketPacket
        do {
            packet = try SocketPacket.decode(payload)
        } catch .binaryNotSupported {
            sendError(RelayError(.binaryNotSupported), event: nil, ackID: nil)
            return
        } catch .duplicateKey(let ackID) {
            if case .connected = phase {
                sendError(RelayError(.invalidPayload, "a JSON object repeats a key"), event: nil, ackID: ackID)
            } else {
                refuseConnect(RelayError(.invalidPayload, "a JSON object repeats a key"), namespace: "/")
            }
            return
        } catch {
            if case .connected = phase {
                sendError(RelayError(.invalidPacket, "malformed Socket.IO packet"), event: nil, ackID: nil)
            } else {
                refuseConnect(RelayError(.invalidPacket, "malformed CONNECT packet"), namespace: "/")
            }
            return
        }
        guard packet.namespace == "/" else {
            if packet.type == .connect {
                sendText(SocketPacket(type: .connectError, namespace: packet.namespace, data: connectErrorPayload(RelayError(.invalidNamespace))).encodedMessage())
                flushOutbound()
            }
            return
        }
        switch packet.type {
        case .connect: handleConnect(packet)
        case .disconnect: close(code: CloseCode.normal, reason: "client disconnected")
        case .event: handleEvent(packet, size: size)
        case .ack, .connectError: break
        case .binaryEvent, .binaryAck: sendError(RelayError(.binaryNotSupported), event: nil, ackID: nil)
        }
    }

    // MARK: CONNECT

    private func handleConnect(_ packet: SocketPacket) {
        switch phase {
        case .connected:
            sendText(SocketPacket(type: .connect, data: .object([("sid", .string(sid))])).encodedMessage())
            flushOutbound()
            return
        case .authenticating, .closed:
            return
        case .awaitingConnect:
            break
        }
        let token = packet.data?["token"]?.stringValue ?? handshake.queryToken ?? handshake.bearerToken ?? ""
        let now = hub.clock.monotonicMs()
        guard relay.admission.mayAuthenticate(ip: handshake.remoteIP, now: now) else {
            hub.metrics.authFailure(.authRateLimited)
            hub.metrics.connectsRefused.increment()
            refuseConnect(RelayError(.authRateLimited), namespace: "/")
            return
        }
        phase = .authenticating
        guard let eventLoop = context?.eventLoop else { return }
        let handler = NIOLoopBound(self, eventLoop: eventLoop)
        relay.authenticate(token, eventLoop).whenSuccess { result in
            handler.value.authenticationCompleted(result)
        }
    }

    private func authenticationCompleted(_ result: Result<AuthenticatedUser, RelayError>) {
        guard case .authenticating = phase, !closing, let shard else { return }
        switch result {
        case .failure(let error):
            relay.admission.recordAuthFailure(ip: handshake.remoteIP, now: hub.clock.monotonicMs())
            hub.metrics.authFailure(error.code)
            hub.metrics.connectsRefused.increment()
            relay.logger.info("auth failed", metadata: ["ip": "\(handshake.remoteIP)", "code": "\(error.code.rawValue)"])
            refuseConnect(error, namespace: "/")
        case .success(let user):
            do throws(RelayError) {
                try hub.register(self, sid: sid, user: user.userID, on: shard, deflate: handshake.deflate != nil, ip: handshake.remoteIP)
            } catch {
                hub.metrics.authFailure(error.code)
                hub.metrics.connectsRefused.increment()
                refuseConnect(error, namespace: "/")
                return
            }
            hub.metrics.connectsOK.increment()
            phase = .connected(user)
            connectTimeout?.cancel()
            authenticated()
            sendText(SocketPacket(type: .connect, data: .object([("sid", .string(sid))])).encodedMessage())
            flushOutbound()
            relay.logger.info("connect", metadata: ["sid": "\(sid)", "user": "\(user.userID)", "ip": "\(handshake.remoteIP)"])
        }
    }

    private func connectErrorPayload(_ error: RelayError) -> JSONValue {
        .object([("message", .string(error.message)), ("data", .object([("code", .string(error.code.rawValue))]))])
    }

    /// Sends CONNECT_ERROR (`44{...}`) and closes the socket.
    private func refuseConnect(_ error: RelayError, namespace: String) {
        sendText(SocketPacket(type: .connectError, namespace: namespace, data: connectErrorPayload(error)).encodedMessage())
        flushOutbound()
        close(code: CloseCode.authenticationFailed, reason: error.code.rawValue)
    }

    // MARK: Events

    private func handleEvent(_ packet: SocketPacket, size: Int) {
        guard case .connected(let user) = phase else {
            sendError(RelayError(.notConnected), event: nil, ackID: packet.ackID)
            return
        }
        let event: InboundEvent
        do {
            event = try InboundEvent(packet: packet)
        } catch {
            sendError(RelayError(.invalidPacket, "an event is [\"name\", payload]"), event: nil, ackID: packet.ackID)
            return
        }
        hub.metrics.eventIn(event.name)
        do throws(RelayError) {
            // Refused names (bad grammar, server-only, custom when disabled) spend the control
            // budget, so a client cannot get unlimited error replies out of the relay.
            let lookup = Result { () throws(RelayError) in
                try EventPolicyTable.policy(forClientEvent: event.name, customEventsEnabled: configuration.customEventsEnabled)
            }
            let rateClass = (try? lookup.get())?.rateClass ?? .control
            guard limiter.allow(rateClass, now: hub.clock.monotonicMs()) else {
                hub.metrics.rateLimit(rateClass)
                throw RelayError(.rateLimited)
            }
            let policy = try lookup.get()
            guard size <= configuration.maxEventBytes else { throw RelayError(.payloadTooLarge, "events are limited to \(configuration.maxEventBytes) bytes") }
            if let reply = try dispatch(event, policy: policy, user: user, ackID: event.ackID) {
                if let id = event.ackID {
                    sendText(SocketPacket.ackMessage(id: id, payload: reply))
                    flushOutbound()
                }
            }
        } catch {
            sendError(error, event: event.name, ackID: event.ackID)
        }
    }

    /// Runs one event. Returns the ack payload, or `nil` when the ack is sent later.
    private func dispatch(_ event: InboundEvent, policy: EventPolicy, user: AuthenticatedUser, ackID: Int64?) throws(RelayError) -> JSONValue? {
        guard let shard else { throw RelayError(.internalError) }
        let ok = JSONValue.object([("ok", true)])
        switch event.name {
        case "room:join":
            let room = try EventValidator.room(in: event.payload)
            guard user.rooms.allows(room) else { throw RelayError(.roomNotAuthorized, "your token does not allow \(room)") }
            let presence = try hub.join(room: room, sink: self, user: user.userID, on: shard)
            ackLater(presence.map { .object([("ok", true), ("room", .string(room)), ("presence", .array($0.map(\.json)))]) }, ackID: ackID)
            return nil
        case "room:leave":
            let room = try EventValidator.room(in: event.payload)
            guard hub.leave(room: room, connection: connectionID, on: shard) else { throw RelayError(.notInRoom) }
            return ok
        case "presence:list":
            let room = try EventValidator.room(in: event.payload)
            guard user.rooms.allows(room) || hub.isMember(room: room, connection: connectionID) else {
                throw RelayError(.roomNotAuthorized, "your token does not allow \(room)")
            }
            ackLater(hub.presence(room: room, on: shard.eventLoop).map { .object([("ok", true), ("room", .string(room)), ("presence", .array($0.map(\.json)))]) }, ackID: ackID)
            return nil
        case "typing:start", "typing:stop":
            let room = try memberRoom(event.payload)
            hub.typing(event.name == "typing:start", room: room, user: user.userID, connection: connectionID)
            return ok
        case "message:reaction":
            let payload = try EventValidator.reaction(event.payload)
            let room = try memberRoom(payload)
            broadcast(event.name, payload, room: room, user: user)
            return ok
        case "location:share-live":
            let (payload, duration) = try EventValidator.shareLive(event.payload)
            let room = try memberRoom(payload)
            try hub.startLiveShare(room: room, user: user.userID, connection: connectionID, durationSec: duration)
            broadcast(event.name, payload, room: room, user: user)
            return ok
        case "location:update":
            let payload = try EventValidator.locationUpdate(event.payload)
            let room = try memberRoom(payload)
            try hub.checkLiveShare(room: room, user: user.userID)
            let key = OutboundQueue<OutboundMessage>.CoalesceKey(event: event.name, room: room, user: user.userID)
            broadcast(event.name, payload, room: room, user: user, coalesceKey: key)
            return ok
        case "location:stop":
            let payload = try EventValidator.roomOnly(event.payload)
            let room = try memberRoom(payload)
            guard hub.stopLiveShare(room: room, user: user.userID) else { throw RelayError(.noLiveShare) }
            broadcast(event.name, payload, room: room, user: user)
            return ok
        case "message:delivered", "message:read", "receipt:sync":
            return try handleReceiptEvent(event, user: user)
        default:
            let payload = try EventValidator.custom(event.payload)
            let room = try memberRoom(payload)
            broadcast(event.name, payload, room: room, user: user)
            return ok
        }
    }

    /// Sends the ack when `reply` completes (on this connection's loop).
    private func ackLater(_ reply: EventLoopFuture<JSONValue>, ackID: Int64?) {
        guard let ackID, let context else { return }
        let handler = NIOLoopBound(self, eventLoop: context.eventLoop)
        reply.whenComplete { result in
            let h = handler.value
            switch result {
            case .success(let payload):
                h.sendText(SocketPacket.ackMessage(id: ackID, payload: payload))
                h.flushOutbound()
            case .failure:
                h.sendError(RelayError(.internalError), event: nil, ackID: ackID)
            }
        }
    }

    /// The payload's room, which this connection must have joined.
    private func memberRoom(_ payload: JSONValue) throws(RelayError) -> String {
        let room = try EventValidator.room(in: payload)
        guard hub.isMember(room: room, connection: connectionID) else { throw RelayError(.notInRoom, "join \(room) first") }
        return room
    }

    private func broadcast(_ name: String, _ payload: JSONValue, room: String, user: AuthenticatedUser, coalesceKey: OutboundQueue<OutboundMessage>.CoalesceKey? = nil) {
        let stamped = EventValidator.stamp(payload, from: user.userID, ts: hub.clock.wallMs())
        hub.publish(room: room, name: name, payload: stamped, excludeConnection: connectionID, coalesceKey: coalesceKey)
    }

    /// An error ack when the event asked for one, else an `error` event.
    func sendError(_ error: RelayError, event: String?, ackID: Int64?) {
        // Error replies are budgeted: a client that keeps sending refused events is closed
        // with 1008 instead of getting an unlimited stream of answers.
        guard errorBudget.tryConsume(now: hub.clock.monotonicMs()) else {
            hub.metrics.errorBudgetCloses.increment()
            close(code: CloseCode.policyViolation, reason: "too many refused events")
            return
        }
        if let ackID {
            sendText(SocketPacket.ackMessage(id: ackID, payload: error.ackPayload))
        } else {
            var body = error.json
            if let event { body = body.setting("event", to: .string(event)) }
            sendText(SocketPacket.eventMessage(name: "error", payload: body))
        }
        flushOutbound()
    }
}
