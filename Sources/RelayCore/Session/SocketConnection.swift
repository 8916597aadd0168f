/// The Socket.IO connection an Engine.IO session carries (the main namespace; one at a time):
/// its lifecycle — awaiting CONNECT, verifying, connected, closed, each case with its data —,
/// the CONNECT and its answer, client events (budget, policy, validation), acks and error
/// replies, and the attachments of binary packets. A value fed the session's Socket.IO
/// payloads and time; it returns `EngineSession.Action`s like the session, and the session
/// carries the Engine.IO side: the open packet, the heartbeat, the upgrade, the inbound packet
/// budget (handed in where an event's bytes are paid from it).
///
/// The session's configuration is passed in, not stored: every socket keeps one of these.
public struct SocketConnection: Sendable {
    public typealias Action = EngineSession.Action

    /// Where the socket stands (`SessionLifecycle`): the CONNECT deadline, the login and its
    /// token deadlines live in its cases.
    public private(set) var lifecycle: SessionLifecycle
    /// The Socket.IO socket id (`sid` of the CONNECT answer); a recovered session takes back
    /// its old one.
    public private(set) var sid: String
    /// A token offered outside the CONNECT packet (query string or `Authorization` header).
    private let fallbackToken: String?
    /// The binary packet (`45`/`46`) whose attachments are being collected, or skipped.
    private var binary = PendingBinary.none
    private var limiter: EventRateLimiter
    /// Error replies, against `budgets.errorReplies`.
    private var errorBudget: BucketLevel

    init(sid: String, fallbackToken: String?, shared: SharedSessionConfiguration, connectDeadline: Int64, now: Int64) {
        self.lifecycle = .awaitingConnect(deadline: connectDeadline, left: false, refusals: 0)
        self.sid = sid
        self.fallbackToken = fallbackToken
        self.limiter = EventRateLimiter(budgets: shared.eventBudgets, now: now)
        self.errorBudget = BucketLevel(shared.value.budgets.errorReplies, now: now)
    }

    /// A new socket after a `41` gets its own id, as the reference server gives one per connect.
    /// Only between sockets.
    mutating func renewSID(_ sid: String) {
        guard case .awaitingConnect = lifecycle else { return }
        self.sid = sid
    }

    /// The session opened (`EngineSession.start`): the CONNECT deadline counts from now.
    mutating func started(connectDeadline: Int64) {
        if case .awaitingConnect(_, let left, let refusals) = lifecycle { lifecycle = .awaitingConnect(deadline: connectDeadline, left: left, refusals: refusals) }
    }

    /// Ends the socket with `code` (with its session). Returns nothing once closed.
    mutating func close(code: UInt16, reason: String) -> [Action] {
        if lifecycle.isClosed { return [] }
        lifecycle = .closed(left: lifecycle.left)
        return [.close(code: code, reason: reason)]
    }

    /// The CONNECT deadline and the token's expiry: `auth:expiring` ahead of it, the close at it.
    mutating func tick(now: Int64) -> [Action] {
        switch lifecycle {
        case .awaitingConnect(let deadline, _, _) where deadline <= now:
            return close(code: CloseCode.connectTimeout, reason: "connect timeout")
        case .connected(var login):
            if let deadline = login.expiryAt, deadline <= now {
                let expired = SocketPacket.eventMessage(name: ServerEvent.authExpired.name, payload: .object([("exp", .int(login.user.expiresAt))]))
                return [.send(expired)] + close(code: CloseCode.tokenExpired, reason: "token expired")
            }
            if let deadline = login.expiryNoticeAt, deadline <= now {
                login.expiryNoticeAt = nil
                let left = max(0, (login.expiryAt ?? now) - now)
                lifecycle = .connected(login)
                return [.send(SocketPacket.eventMessage(
                    name: ServerEvent.authExpiring.name, payload: .object([("exp", .int(login.user.expiresAt)), ("expiresInMs", .int(left))])))]
            }
            return []
        default:
            return []
        }
    }

    // MARK: Inbound

    /// One Socket.IO packet (the payload of an Engine.IO `4`), `size` bytes as it came.
    mutating func receive(
        _ payload: ArraySlice<UInt8>, size: Int, inbound: inout InboundBudget, _ c: SessionConfiguration, now: Int64, wallMs: Int64
    ) -> [Action] {
        let packet: SocketPacket
        // A binary packet before CONNECT is refused at its header: its attachments are never
        // assembled for a client that has not logged in, and are skipped without a refusal of
        // their own (the session stays open after a refusal).
        if case .connected = lifecycle {
        } else if let type = payload.first, type == UInt8(ascii: "5") || type == UInt8(ascii: "6") {
            try? binary.withAssembler(c) { assembler throws(ProtocolError) in
                assembler.reset()
                assembler.skipAttachments(ofRefusedHeader: payload)
            }
            return refuse(RelayError(.notConnected, "binary packets are accepted once connected"), ackID: nil, c, now: now)
        }
        do {
            switch try binary.withAssembler(c, { assembler throws(ProtocolError) in try assembler.receiveText(payload) }) {
            case .packet(let p): packet = p
            case .binaryPacket(let binary): return receiveBinaryPacket(binary, inbound: &inbound, c, now: now, wallMs: wallMs)
            case .awaitingAttachments, .skipped: return []
            }
        } catch {
            return malformed(error, c, now: now)
        }
        guard packet.namespace == "/" else {
            guard packet.type == .connect else { return [] }
            // The protocol's own answer, word for word (its test suite compares the packet).
            let refusal = SocketPacket(type: .connectError, namespace: packet.namespace, data: .object([("message", .string("Invalid namespace"))]))
            return [.send(refusal.encodedMessage())]
        }
        switch packet.type {
        case .connect: return receiveConnect(packet, c, now: now)
        case .disconnect: return receiveDisconnect(c, now: now)
        case .event: return receiveEvent(packet, size: size, inbound: &inbound, c, now: now, wallMs: wallMs)
        case .ack, .connectError: return []
        case .binaryEvent, .binaryAck: return []  // the assembler returns them whole
        }
    }

    /// One attachment of a binary packet, given to the assembler by `take` (a WebSocket binary
    /// message, or a polling `b<base64>` packet).
    mutating func receiveAttachment(
        inbound: inout InboundBudget, _ c: SessionConfiguration, now: Int64, wallMs: Int64,
        _ take: (inout BinaryPacketAssembler) throws(ProtocolError) -> BinaryPacketAssembler.Output
    ) -> [Action] {
        do {
            switch try binary.withAssembler(c, take) {
            case .binaryPacket(let packet): return receiveBinaryPacket(packet, inbound: &inbound, c, now: now, wallMs: wallMs)
            case .packet, .awaitingAttachments, .skipped: return []
            }
        } catch {
            return malformed(error, c, now: now)
        }
    }

    /// A binary event with its attachments: only custom events carry binary (forwarded with the
    /// same bytes); binary acks answer nothing Relay asked.
    private mutating func receiveBinaryPacket(_ binary: BinaryPacket, inbound: inout InboundBudget, _ c: SessionConfiguration, now: Int64, wallMs: Int64) -> [Action] {
        guard binary.header.namespace == "/", binary.header.type == .binaryEvent else { return [] }
        guard case .connected(let login) = lifecycle else {
            return fail(RelayError(.notConnected), event: nil, ackID: binary.header.ackID, c, now: now)
        }
        let event: InboundEvent
        do {
            event = try InboundEvent(binary: binary)
        } catch {
            return close(code: CloseCode.protocolError, reason: "invalid Socket.IO packet")
        }
        // Measured as every recipient is charged: long-polling carries attachments as base64.
        return dispatch(event, user: login.user, size: binary.recipientByteCount, inbound: &inbound, c, now: now, wallMs: wallMs)
    }

    /// A packet refused for a limit or Relay's stricter JSON: an error reply once connected, a
    /// refused CONNECT before.
    private mutating func refuse(_ error: RelayError, ackID: Int64?, _ c: SessionConfiguration, now: Int64) -> [Action] {
        switch lifecycle {
        case .connected: return fail(error, event: nil, ackID: ackID, c, now: now)
        // The CONNECT's rooms may already be joined: the registration must not outlive it.
        case .verifying: return refuseConnect(error, c, now: now, closing: true)
        case .awaitingConnect, .closed: return refuseConnect(error, c, now: now)
        }
    }

    /// A packet the Socket.IO parser cannot read. Before CONNECT the CONNECT is refused (the
    /// client learns why); after it the connection closes with 1002, as the protocol closes it
    /// (a client whose packets do not parse cannot be answered reliably). Relay's own limits
    /// (attachment counts, sizes) and its refusal of duplicate JSON keys stay error replies.
    private mutating func malformed(_ error: ProtocolError, _ c: SessionConfiguration, now: Int64) -> [Action] {
        switch error {
        case .duplicateKey, .tooManyAttachments, .binaryPacketTooLarge:
            return refuse(error.relayError, ackID: error.ackID, c, now: now)
        default:
            guard case .connected = lifecycle else { return refuse(error.relayError, ackID: nil, c, now: now) }
            return close(code: CloseCode.protocolError, reason: "invalid Socket.IO packet")
        }
    }

    /// Socket.IO DISCONNECT (`41`): the socket leaves, the Engine.IO session stays open (the
    /// protocol's rule: socket.io-client-swift's `socket.disconnect()` keeps its manager
    /// connected and may CONNECT again on it). What held before the first CONNECT holds again:
    /// the CONNECT deadline, the pre-authentication limits; the rooms it leaves are paid from
    /// the join budget, as `room:leave` pays, so a `40`/`41` loop cannot make more presence
    /// events than `room:join`/`room:leave` may.
    private mutating func receiveDisconnect(_ c: SessionConfiguration, now: Int64) -> [Action] {
        switch lifecycle {
        case .connected(let login):
            lifecycle = .awaitingConnect(deadline: now + c.connectTimeoutMs, left: true, refusals: 0)
            limiter.spend(EventPolicyTable.roomLeave.rateClass, count: login.rooms, now: now)
            return [.leave, .limits(LimitsInForce(lifecycle, c))]
        case .verifying(_, let refusals):
            // Its CONNECT is being verified: a later answer would reach a socket that left.
            lifecycle = .verifying(left: true, refusals: refusals)
            return close(code: CloseCode.normal, reason: "client disconnected")
        case .awaitingConnect, .closed:
            return []
        }
    }

    private mutating func receiveConnect(_ packet: SocketPacket, _ c: SessionConfiguration, now: Int64) -> [Action] {
        switch lifecycle {
        case .connected(let login):
            // A repeated CONNECT is answered again; nothing changes.
            return [.send(login.answer ?? SocketPacket(type: .connect, data: ConnectAnswer(user: login.user).json(sid: sid)).encodedMessage())]
        case .verifying, .closed:
            return []
        case .awaitingConnect(_, let left, let refusals):
            lifecycle = .verifying(left: left, refusals: refusals)
            do throws(RelayError) {
                var request = try ConnectRequest(data: packet.data, fallbackToken: fallbackToken, maxRooms: c.maxRoomsInConnect)
                // Rooms named here are joins like `room:join`'s, from the same budget: the rest
                // are refused `rate_limited` in the answer.
                let allowed = limiter.take(EventPolicyTable.roomJoin.rateClass, count: request.rooms.count, now: now)
                if allowed < request.rooms.count {
                    request.overBudget = Array(request.rooms[allowed...])
                    request.rooms.removeSubrange(allowed...)
                }
                return [.authenticate(request)]
            } catch {
                return refuseConnect(error, c, now: now)
            }
        }
    }

    /// The token was verified and the connection recovered or registered (`.success`), or not.
    /// With `wallMs`, the token's `exp` is enforced: `auth:expiring` ahead of it, the close at
    /// `exp` + leeway.
    mutating func connectFinished(
        _ result: Result<ConnectAnswer, RelayError>, _ c: SessionConfiguration, now: Int64, wallMs: Int64?
    ) -> [Action] {
        guard case .verifying = lifecycle else { return [] }
        switch result {
        case .failure(let error):
            return refuseConnect(error, c, now: now)
        case .success(let outcome):
            if let sid = outcome.socketSID { self.sid = sid }
            let bytes = SocketPacket(type: .connect, data: outcome.json(sid: sid)).encodedMessage()
            let plain = outcome.pid == nil && outcome.rooms.isEmpty && outcome.refused.isEmpty
            var login = SessionLifecycle.Login(user: outcome.user, rooms: outcome.rooms.count, answer: plain ? nil : bytes)
            if let wallMs { login.armTokenExpiry(c.tokens, now: now, wallMs: wallMs) }
            lifecycle = .connected(login)
            return [.limits(LimitsInForce(lifecycle, c)), .send(bytes)]
        }
    }

    /// The socket proved a new token (`auth:refresh`) for the same user: its rooms and expiry
    /// are the new token's from now on.
    mutating func tokenRefreshed(_ user: AuthenticatedUser, _ c: SessionConfiguration, now: Int64, wallMs: Int64) {
        guard case .connected(var login) = lifecycle, login.user.userID == user.userID else { return }
        login.user = user
        login.armTokenExpiry(c.tokens, now: now, wallMs: wallMs)
        lifecycle = .connected(login)
    }

    /// CONNECT_ERROR (`44{…}`) on the session's transport, once. The session stays open for
    /// another `40`, with a new CONNECT deadline, as the reference server keeps it: a client
    /// that reads the refusal is not made to reconnect (socket.io-client-swift reconnects at
    /// once when the connection closes, with the same payload), and may CONNECT again on the
    /// same session with a new token. The `maxConnectRefusals`th refusal of a session closes it
    /// with 4003: a session is not a place to try tokens. A packet refused while the CONNECT is
    /// verified closes at once (`closing`): its rooms may already be joined, and the
    /// registration must not outlive the socket. While a WebSocket is probed the refusal waits
    /// on polling like any packet: a `GET` takes it, or the upgrade moves it on.
    private mutating func refuseConnect(_ error: RelayError, _ c: SessionConfiguration, now: Int64, closing: Bool = false) -> [Action] {
        let refusal: Action = .send(SocketPacket(type: .connectError, data: error.connectErrorPayload).encodedMessage())
        switch lifecycle {
        case .closed, .connected:
            return []
        case .awaitingConnect(_, let left, let refusals), .verifying(let left, let refusals):
            guard !closing, refusals + 1 < c.maxConnectRefusals else {
                return [refusal] + close(code: CloseCode.authenticationFailed, reason: error.code.rawValue)
            }
            lifecycle = .awaitingConnect(deadline: now + c.connectTimeoutMs, left: left, refusals: refusals + 1)
            return [refusal]
        }
    }

    private mutating func receiveEvent(_ packet: SocketPacket, size: Int, inbound: inout InboundBudget, _ c: SessionConfiguration, now: Int64, wallMs: Int64) -> [Action] {
        guard case .connected(let login) = lifecycle else {
            return fail(RelayError(.notConnected), event: nil, ackID: packet.ackID, c, now: now)
        }
        let event: InboundEvent
        do {
            event = try InboundEvent(packet: packet)
        } catch {
            // Not an event at all (`42{}`, `42[]`, `42[1]`): malformed, as the protocol says.
            return close(code: CloseCode.protocolError, reason: "invalid Socket.IO packet")
        }
        return dispatch(event, user: login.user, size: size, inbound: &inbound, c, now: now, wallMs: wallMs)
    }

    /// Budget, policy and validation of one client event; `size` is its encoded size (an
    /// event's JSON, or a binary packet with its attachments), bounded by `maxEventBytes`.
    private mutating func dispatch(
        _ event: InboundEvent, user: AuthenticatedUser, size: Int, inbound: inout InboundBudget, _ c: SessionConfiguration, now: Int64, wallMs: Int64
    ) -> [Action] {
        do throws(RelayError) {
            // Refused names (bad grammar, server-only, custom when disabled) spend the control
            // budget, so a client cannot get unlimited error replies out of the relay.
            let lookup = Result { () throws(RelayError) in
                try EventPolicyTable.policy(forClientEvent: event.name, customEventsEnabled: c.customEventsEnabled)
            }
            let rateClass = (try? lookup.get())?.rateClass ?? .control
            guard limiter.allow(rateClass, now: now) else {
                return [.received(event: event.name), .rateLimited(rateClass)] + fail(RelayError(.rateLimited), event: event.name, ackID: event.ackID, c, now: now)
            }
            let policy = try lookup.get()
            guard size <= c.maxEventBytes else {
                throw RelayError(.payloadTooLarge, "events are limited to \(c.maxEventBytes) bytes")
            }
            guard inbound.takeEventBytes(size, limits: c.budgets.inbound, now: now) else {
                return [.received(event: event.name), .rateLimited(rateClass)] + fail(RelayError(.rateLimited), event: event.name, ackID: event.ackID, c, now: now)
            }
            let typed = try ClientEvent(event, policy: policy, userID: user.userID, wallMs: wallMs)
            return [.received(event: event.name), .handle(typed, ackID: event.ackID, user: user)]
        } catch {
            return [.received(event: event.name)] + fail(error, event: event.name, ackID: event.ackID, c, now: now)
        }
    }

    // MARK: Replies

    /// The actions for `reply`: nothing once closed; error replies spend their budget.
    mutating func reply(_ reply: EngineSession.Reply, _ c: SessionConfiguration, now: Int64) -> [Action] {
        switch reply {
        case .ack(let id, let payload):
            if lifecycle.isClosed { return [] }
            return [.send(SocketPacket.ackMessage(id: id, payload: payload))]
        case .binaryAck(let id, let payload, let attachments):
            if lifecycle.isClosed { return [] }
            let encoded = BinaryPacket.ack(id: id, payload: payload, attachments: attachments).encoded()
            return [.sendBinary(header: encoded.header, attachments: encoded.attachments)]
        case .failure(let error, let event, let ackID):
            return fail(error, event: event, ackID: ackID, c, now: now)
        }
    }

    /// An error reply: the error ack when the event asked for one, else an `error` event.
    /// Error replies spend a budget; past it the session closes with 1008 instead of answering.
    mutating func fail(_ error: RelayError, event: String?, ackID: Int64?, _ c: SessionConfiguration, now: Int64) -> [Action] {
        if lifecycle.isClosed { return [] }
        guard errorBudget.tryConsume(1, c.budgets.errorReplies, now: now) else {
            return close(code: CloseCode.policyViolation, reason: "too many refused events")
        }
        if let ackID { return [.send(SocketPacket.ackMessage(id: ackID, payload: error.ackPayload))] }
        var body = error.json
        if let event { body = body.setting("event", to: .string(event)) }
        return [.send(SocketPacket.eventMessage(name: EventPolicyTable.errorEventName, payload: body))]
    }
}

extension SocketConnection {
    /// The binary packet being assembled: boxed, and only while there is one, so that the
    /// sockets that never see one (nearly all) do not carry the assembler's 112 bytes.
    private enum PendingBinary: Sendable {
        case none
        indirect case some(BinaryPacketAssembler)

        /// Runs `body` on the assembler of binary packets: the one collecting (or skipping) a
        /// binary packet's attachments, or an idle one. Kept afterwards only while it is not idle.
        mutating func withAssembler<Result>(
            _ c: SessionConfiguration, _ body: (inout BinaryPacketAssembler) throws(ProtocolError) -> Result
        ) throws(ProtocolError) -> Result {
            var assembler: BinaryPacketAssembler
            if case .some(let pending) = self {
                assembler = pending
            } else {
                // A binary event is held to the event limit too (its base64 cost is checked once
                // whole): the assembler never keeps more than one event may carry.
                assembler = BinaryPacketAssembler(maxPayload: min(c.maxPayload, c.maxEventBytes), maxAttachments: c.maxAttachments)
            }
            defer { self = assembler.isAwaitingAttachments || assembler.remainingSkips > 0 ? .some(assembler) : .none }
            return try body(&assembler)
        }
    }
}
