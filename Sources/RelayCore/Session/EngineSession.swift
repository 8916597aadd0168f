/// One Engine.IO v4 session carrying one Socket.IO v5 connection to the main namespace, as a
/// value type: fed packets and time, it returns the actions its transport carries out. It
/// knows nothing of sockets, event loops or timers, so every rule (heartbeat, CONNECT,
/// event validation and budgets, the polling → WebSocket upgrade) is tested without a socket.
///
/// The transports (WebSocket, HTTP long-polling) are thin adapters: they turn frames or
/// request bodies into `receive` calls, call `tick` when `nextDeadline` passes, and perform the
/// returned `Action`s in order.
public struct EngineSession: Sendable {
    public enum Transport: Sendable, Equatable {
        case polling
        case websocket
    }

    /// The lifecycle's state without its data (`lifecycle` has it).
    public enum Phase: Sendable, Equatable {
        /// Waiting for the client's CONNECT (`40`).
        case awaitingConnect
        /// The token is being verified.
        case authenticating
        case connected(AuthenticatedUser)
        case closed
    }

    public enum Action: Sendable, Equatable {
        /// Write one Engine.IO packet (text) on the session's current transport.
        case send([UInt8])
        /// Write a binary packet on the session's current transport: its header (`46<n>-…`, text),
        /// then each attachment as one binary message.
        case sendBinary(header: [UInt8], attachments: [[UInt8]])
        /// Write one Engine.IO packet on the WebSocket being probed for an upgrade.
        case sendProbe([UInt8])
        /// Answer a pending long-poll with `noop` now (an upgrade is under way).
        case releasePoll
        /// The upgrade completed: the WebSocket is the transport from now on. What the polling
        /// transport still buffers goes out on it, in order, before anything newer.
        case upgraded
        /// The probing WebSocket failed or timed out: close it; the session stays on polling.
        case abortProbe(reason: String)
        /// Verify the request's token (checking the caller's failed-authentication budget
        /// first), recover or register the connection, join the requested rooms, then call
        /// `connectFinished(_:now:)`.
        case authenticate(ConnectRequest)
        /// Run this validated client event for `user`; when `ackID` is set it gets exactly one
        /// ack (`ack(_:payload:)` or `fail(_:event:ackID:now:)`).
        case handle(ClientEvent, ackID: Int64?, user: AuthenticatedUser)
        /// The client sent Socket.IO DISCONNECT (`41`): its socket leaves the hub (rooms,
        /// presence; not kept for recovery); the Engine.IO session stays open and may CONNECT again.
        case leave
        /// The limits in force changed (CONNECT succeeded, or the socket left with `41`): every
        /// transport of the session, the probe included, enforces these from now on.
        case limits(LimitsInForce)
        /// End the session: close the transport with this WebSocket close code.
        case close(code: UInt16, reason: String)
        /// For metrics: a client event named `event` arrived (valid or not).
        case received(event: String)
        /// For metrics: an event was refused by the `RateClass` budget.
        case rateLimited(RateClass)
    }

    private let shared: SharedSessionConfiguration
    public var configuration: SessionConfiguration { shared.value }
    /// The Engine.IO session id (`sid` of the open packet).
    public let engineSID: String
    /// The Socket.IO socket id (`sid` of the CONNECT answer); a recovered session takes back
    /// its old one.
    public private(set) var socketSID: String
    // Every socket keeps one session for its whole life, so its fields are laid out for size:
    // small ones together, rare state (a binary packet being assembled) boxed and only while
    // it exists, deadlines in 8 bytes, budgets without their (shared) limits.
    /// Where the socket stands (`SessionLifecycle`): the CONNECT deadline, the login and its
    /// token deadlines live in its cases.
    public private(set) var lifecycle: SessionLifecycle
    /// Which transport carries the session and how far an upgrade is (`UpgradeState`).
    public private(set) var upgrade: UpgradeState

    /// A token offered outside the CONNECT packet (query string or `Authorization` header).
    private let fallbackToken: String?
    /// The binary packet (`45`/`46`) whose attachments are being collected, or skipped.
    private var binary = PendingBinary.none
    private var limiter: EventRateLimiter
    /// Error replies, against `configuration.budgets.errorReplies`.
    private var errorBudget: BucketLevel
    /// Packets and event bytes, whatever the transport (`InboundBudget`), against
    /// `configuration.budgets.inbound`.
    private var inbound: InboundBudget
    /// The heartbeat: the next ping, or the pong awaited. Holds in every state but `closed`.
    @PackedDeadline private var nextPingAt: Int64? = nil
    @PackedDeadline private var pongDeadline: Int64? = nil

    public init(
        configuration: SessionConfiguration, transport: Transport, engineSID: String, socketSID: String,
        fallbackToken: String? = nil, now: Int64
    ) {
        self.init(
            shared: SharedSessionConfiguration(configuration), transport: transport, engineSID: engineSID, socketSID: socketSID,
            fallbackToken: fallbackToken, now: now)
    }

    /// A session that reads its configuration from the server's one shared copy.
    public init(
        shared: SharedSessionConfiguration, transport: Transport, engineSID: String, socketSID: String,
        fallbackToken: String? = nil, now: Int64
    ) {
        self.shared = shared
        let configuration = shared.value
        // Until `start`, the CONNECT deadline counts from creation.
        self.lifecycle = .awaitingConnect(deadline: now + configuration.connectTimeoutMs, left: false)
        self.upgrade = transport == .polling ? .polling : .websocket(UpgradeHandover())
        self.engineSID = engineSID
        self.socketSID = socketSID
        self.fallbackToken = fallbackToken
        self.limiter = EventRateLimiter(budgets: shared.eventBudgets, now: now)
        self.errorBudget = BucketLevel(configuration.budgets.errorReplies, now: now)
        self.inbound = InboundBudget(limits: configuration.budgets.inbound, now: now)
    }

    /// A new Socket.IO socket on this Engine.IO session (a CONNECT after a `41`) gets its own
    /// id, as the reference server gives one per connect: logs and the admin API tell the two
    /// sockets apart. Only between sockets.
    public mutating func renewSocketSID(_ sid: String) {
        guard case .awaitingConnect = lifecycle else { return }
        socketSID = sid
    }

    /// The lifecycle without its data.
    public var phase: Phase {
        switch lifecycle {
        case .awaitingConnect: return .awaitingConnect
        case .verifying: return .authenticating
        case .connected(let login): return .connected(login.user)
        case .closed: return .closed
        }
    }

    /// The user once CONNECT succeeded.
    public var user: AuthenticatedUser? {
        if case .connected(let login) = lifecycle { return login.user }
        return nil
    }

    public var isClosed: Bool { lifecycle.isClosed }

    /// The transport packets go out on.
    public var transport: Transport { upgrade.transport }

    /// A WebSocket is being probed to replace the polling transport.
    public var upgrading: Bool { upgrade.isProbing }

    /// The client left on purpose (Socket.IO DISCONNECT `41`) and has not connected again: its
    /// session is not kept for recovery.
    public var clientDisconnected: Bool { lifecycle.left }

    /// The inbound limits that hold in the current state: `maxPayload` once connected, the small
    /// pre-authentication size before CONNECT succeeded and again after a `41`.
    public var limits: LimitsInForce {
        LimitsInForce(lifecycle, configuration)
    }

    /// When `tick` must be called next (monotonic ms), if ever.
    public var nextDeadline: Int64? {
        // Read after every packet: compared in place, no array.
        func earlier(_ a: Int64?, _ b: Int64?) -> Int64? {
            guard let a else { return b }
            guard let b else { return a }
            return min(a, b)
        }
        var upgradeDeadline: Int64?
        switch upgrade {
        case .polling: upgradeDeadline = nil
        case .probing(let deadline): upgradeDeadline = deadline
        case .websocket(let handover): upgradeDeadline = handover.deadline
        }
        var stateDeadline = lifecycle.deadline
        if case .connected(let login) = lifecycle { stateDeadline = earlier(login.expiryNoticeAt, login.expiryAt) }
        return earlier(earlier(nextPingAt, pongDeadline), earlier(stateDeadline, upgradeDeadline))
    }

    // MARK: Lifecycle

    /// Opens the session: the open packet, then the heartbeat and the CONNECT deadline.
    public mutating func start(now: Int64) -> [Action] {
        nextPingAt = now + configuration.heartbeat.intervalMs
        if case .awaitingConnect(_, let left) = lifecycle { lifecycle = .awaitingConnect(deadline: now + configuration.connectTimeoutMs, left: left) }
        let open = EnginePacket.openPayload(
            sid: engineSID, upgrades: transport == .polling ? ["websocket"] : [],
            pingInterval: Int(clamping: configuration.heartbeat.intervalMs), pingTimeout: Int(clamping: configuration.heartbeat.timeoutMs),
            maxPayload: configuration.maxPayload)
        return [.send(open)]
    }

    /// Timers: the ping, the pong deadline, the CONNECT deadline, the upgrade deadline, the
    /// token's expiry.
    public mutating func tick(now: Int64) -> [Action] {
        if lifecycle.isClosed { return [] }
        var actions: [Action] = []
        switch upgrade {
        case .polling:
            break
        case .probing(let deadline):
            if deadline <= now {
                upgrade = .polling
                actions.append(.abortProbe(reason: "upgrade timeout"))
            }
        case .websocket(let handover):
            if let deadline = handover.deadline, deadline <= now {
                // No CONNECT came by polling: what the WebSocket sent is taken as it came.
                actions += takeHeld(now: now)
                if lifecycle.isClosed { return actions }
            }
        }
        switch lifecycle {
        case .awaitingConnect(let deadline, _) where deadline <= now:
            return actions + close(code: CloseCode.connectTimeout, reason: "connect timeout")
        case .connected(var login):
            if let deadline = login.expiryAt, deadline <= now {
                let expired = SocketPacket.eventMessage(name: ServerEvent.authExpired.name, payload: .object([("exp", .int(login.user.expiresAt))]))
                return actions + [.send(expired)] + close(code: CloseCode.tokenExpired, reason: "token expired")
            }
            if let deadline = login.expiryNoticeAt, deadline <= now {
                login.expiryNoticeAt = nil
                let left = max(0, (login.expiryAt ?? now) - now)
                lifecycle = .connected(login)
                actions.append(.send(SocketPacket.eventMessage(
                    name: ServerEvent.authExpiring.name, payload: .object([("exp", .int(login.user.expiresAt)), ("expiresInMs", .int(left))]))))
            }
        default:
            break
        }
        if let deadline = pongDeadline, deadline <= now {
            return actions + close(code: CloseCode.pingTimeout, reason: "ping timeout")
        }
        if let due = nextPingAt, due <= now {
            nextPingAt = nil
            pongDeadline = now + configuration.heartbeat.timeoutMs
            actions.append(.send(EnginePacket.pingFrame))
        }
        return actions
    }

    /// The server is shutting down: Engine.IO close, then 1001.
    public mutating func goAway() -> [Action] {
        if lifecycle.isClosed { return [] }
        return [.send(EnginePacket.closeFrame)] + close(code: CloseCode.goingAway, reason: "server shutting down")
    }

    /// Ends the session with `code` (the transport broke a rule, a limit was passed, an operator
    /// kicked it). Returns nothing once closed.
    public mutating func close(code: UInt16, reason: String) -> [Action] {
        if lifecycle.isClosed { return [] }
        lifecycle = .closed(left: lifecycle.left)
        nextPingAt = nil
        pongDeadline = nil
        switch upgrade {
        case .polling, .probing: upgrade = .polling
        case .websocket: upgrade = .websocket(UpgradeHandover())
        }
        return [.close(code: code, reason: reason)]
    }

    // MARK: Inbound

    /// One whole Engine.IO text packet from `from` (a WebSocket message, or one packet of a
    /// polling body).
    /// - Parameters:
    ///   - now: monotonic time, ms (timers and budgets).
    ///   - wallMs: wall-clock time, ms since 1970 (the `ts` of receipts).
    public mutating func receive(_ packet: ArraySlice<UInt8>, from: Transport, now: Int64, wallMs: Int64) -> [Action] {
        if lifecycle.isClosed { return [] }
        if from != transport {
            guard from == .polling else { return receiveOnProbe(packet, now: now) }
            // A polling request after the upgrade: the session's only if it was sent before it.
            guard acceptsPolling(now: now) else { return [] }
        }
        guard inbound.takePacket(size: packet.count, limits: configuration.budgets.inbound, now: now) else { return close(code: CloseCode.policyViolation, reason: "too many packets") }
        if from == .websocket, case .awaitingConnect(_, left: false) = lifecycle, upgrade.mayHoldForLateConnect(packet, now: now),
            upgrade.holdForLateConnect(packet)
        {
            return []
        }
        // Long-polling carries a binary attachment as `b<base64>`.
        if from == .polling, packet.first == UInt8(ascii: "b") {
            return receiveAttachment(now: now, wallMs: wallMs) { assembler throws(ProtocolError) in try assembler.receiveBase64(packet.dropFirst()) }
        }
        let decoded: EnginePacket
        do {
            decoded = try EnginePacket.decode(packet)
        } catch {
            return close(code: CloseCode.protocolError, reason: "invalid Engine.IO packet")
        }
        switch decoded {
        case .pong:
            // A pong nobody asked for changes nothing.
            guard pongDeadline != nil else { return [] }
            pongDeadline = nil
            nextPingAt = now + configuration.heartbeat.intervalMs
            return []
        case .ping(let data):
            // Engine.IO v3-style client heartbeats keep working; the echo is bounded.
            guard data.utf8.count <= configuration.budgets.inbound.maxPingBytes else {
                return close(code: CloseCode.protocolError, reason: "ping data too long")
            }
            return [.send(Array(("3" + data).utf8))]
        case .close:
            return close(code: CloseCode.normal, reason: "client closed")
        case .message(let payload):
            return receiveSocketPacket(payload, size: packet.count, now: now, wallMs: wallMs)
        case .noop, .upgrade:
            return []
        case .open:
            return close(code: CloseCode.protocolError, reason: "clients do not send open packets")
        }
    }

    /// Whether a polling request at `now` is the session's: polling is its transport, or it
    /// moved to WebSocket so recently that the client may have sent the request before the `5`.
    public func acceptsPolling(now: Int64) -> Bool {
        upgrade.acceptsPolling(now: now)
    }

    /// What the WebSocket sent while a late CONNECT was awaited, taken in order.
    private mutating func takeHeld(now: Int64) -> [Action] {
        guard case .websocket(var handover) = upgrade else { return [] }
        let held = handover.release()
        upgrade = .websocket(handover)
        var actions: [Action] = []
        for packet in held {
            if lifecycle.isClosed { break }
            // Held only before a CONNECT was verified, so none of them is run as an event and
            // the wall clock (the `ts` of receipts) is never read.
            actions += receiveSocketPacket(packet.dropFirst(), size: packet.count, now: now, wallMs: 0)
        }
        return actions
    }

    /// A WebSocket frame of `size` bytes that is not a whole message — a control frame (ping,
    /// pong) the transport answers, or a fragment of a message not complete yet — on any of the
    /// session's WebSockets, its probe included: the session's budget pays for it, as for a
    /// packet, so that frames which complete nothing cannot be sent for free.
    public mutating func receiveFrame(size: Int, now: Int64) -> [Action] {
        if lifecycle.isClosed { return [] }
        guard inbound.takePacket(size: size, limits: configuration.budgets.inbound, now: now) else { return close(code: CloseCode.policyViolation, reason: "too many packets") }
        return []
    }

    /// A WebSocket opened for this session's `sid` while it runs on polling.
    public mutating func probeOpened(now: Int64) -> [Action] {
        guard !lifecycle.isClosed, case .polling = upgrade else { return [.abortProbe(reason: "no upgrade possible")] }
        upgrade = .probing(deadline: now + configuration.upgradeTimeoutMs)
        return []
    }

    /// The probing WebSocket closed before the upgrade completed.
    public mutating func probeClosed() {
        if case .probing = upgrade { upgrade = .polling }
    }

    /// A packet on the probing WebSocket: it spends the session's budget like any other (a
    /// flood of `2probe` or `6` is closed 1008, whichever socket carries it).
    private mutating func receiveOnProbe(_ packet: ArraySlice<UInt8>, now: Int64) -> [Action] {
        guard case .probing = upgrade else { return [.abortProbe(reason: "unexpected packet on the probe")] }
        guard inbound.takePacket(size: packet.count, limits: configuration.budgets.inbound, now: now) else { return close(code: CloseCode.policyViolation, reason: "too many packets") }
        switch try? EnginePacket.decode(packet) {
        case .ping("probe"):
            return [.sendProbe(Array("3probe".utf8)), .releasePoll]
        case .upgrade:
            var handover = UpgradeHandover()
            handover.begin(now: now, windowMs: configuration.upgradeTimeoutMs)
            upgrade = .websocket(handover)
            return [.upgraded]
        case .noop:
            return []
        default:
            upgrade = .polling
            return [.abortProbe(reason: "unexpected packet on the probe")]
        }
    }

    /// One binary message (a WebSocket binary frame): the next attachment of a `45`/`46`.
    public mutating func receiveBinary(_ bytes: [UInt8], from: Transport, now: Int64, wallMs: Int64) -> [Action] {
        if lifecycle.isClosed { return [] }
        guard from == transport else { return [.abortProbe(reason: "unexpected packet on the probe")] }
        guard inbound.takePacket(size: bytes.count, limits: configuration.budgets.inbound, now: now) else { return close(code: CloseCode.policyViolation, reason: "too many packets") }
        return receiveAttachment(now: now, wallMs: wallMs) { assembler throws(ProtocolError) in try assembler.receiveBinary(bytes) }
    }

    private mutating func receiveAttachment(
        now: Int64, wallMs: Int64, _ take: (inout BinaryPacketAssembler) throws(ProtocolError) -> BinaryPacketAssembler.Output
    ) -> [Action] {
        do {
            switch try binary.withAssembler(configuration, take) {
            case .binaryPacket(let packet): return receiveBinaryPacket(packet, now: now, wallMs: wallMs)
            case .packet, .awaitingAttachments, .skipped: return []
            }
        } catch {
            return malformed(error, now: now)
        }
    }

    // MARK: Socket.IO

    private mutating func receiveSocketPacket(_ payload: ArraySlice<UInt8>, size: Int, now: Int64, wallMs: Int64) -> [Action] {
        let packet: SocketPacket
        // A binary packet before CONNECT is refused at its header: its attachments are never
        // assembled for a client that has not logged in.
        if user == nil, let type = payload.first, type == UInt8(ascii: "5") || type == UInt8(ascii: "6") {
            return refuse(RelayError(.notConnected, "binary packets are accepted once connected"), ackID: nil, now: now)
        }
        do {
            switch try binary.withAssembler(configuration, { assembler throws(ProtocolError) in try assembler.receiveText(payload) }) {
            case .packet(let p): packet = p
            case .binaryPacket(let binary): return receiveBinaryPacket(binary, now: now, wallMs: wallMs)
            case .awaitingAttachments, .skipped: return []
            }
        } catch {
            return malformed(error, now: now)
        }
        guard packet.namespace == "/" else {
            guard packet.type == .connect else { return [] }
            // The protocol's own answer, word for word (its test suite compares the packet).
            let refusal = SocketPacket(type: .connectError, namespace: packet.namespace, data: .object([("message", .string("Invalid namespace"))]))
            return [.send(refusal.encodedMessage())]
        }
        switch packet.type {
        case .connect:
            let actions = receiveConnect(packet, now: now)
            // A CONNECT that came late by polling goes before what the WebSocket sent after it.
            return upgrade.isHoldingForLateConnect ? actions + takeHeld(now: now) : actions
        case .disconnect: return receiveDisconnect(now: now)
        case .event: return receiveEvent(packet, size: size, now: now, wallMs: wallMs)
        case .ack, .connectError: return []
        case .binaryEvent, .binaryAck: return []  // the assembler returns them whole
        }
    }

    /// A binary event with its attachments: only custom events carry binary (forwarded with the
    /// same bytes); binary acks answer nothing Relay asked.
    private mutating func receiveBinaryPacket(_ binary: BinaryPacket, now: Int64, wallMs: Int64) -> [Action] {
        guard binary.header.namespace == "/", binary.header.type == .binaryEvent else { return [] }
        guard case .connected(let login) = lifecycle else {
            return fail(RelayError(.notConnected), event: nil, ackID: binary.header.ackID, now: now)
        }
        let event: InboundEvent
        do {
            event = try InboundEvent(binary: binary)
        } catch {
            return close(code: CloseCode.protocolError, reason: "invalid Socket.IO packet")
        }
        // Measured as every recipient is charged: long-polling carries attachments as base64.
        return dispatch(event, user: login.user, size: binary.recipientByteCount, maxBytes: configuration.maxEventBytes, now: now, wallMs: wallMs)
    }

    /// A packet refused for a limit or Relay's stricter JSON: an error reply once connected, a
    /// refused CONNECT before.
    private mutating func refuse(_ error: RelayError, ackID: Int64?, now: Int64) -> [Action] {
        if case .connected = lifecycle { return fail(error, event: nil, ackID: ackID, now: now) }
        return refuseConnect(error)
    }

    /// A packet the Socket.IO parser cannot read. Before CONNECT the CONNECT is refused (the
    /// client learns why); after it the connection closes with 1002, as the protocol closes it
    /// (a client whose packets do not parse cannot be answered reliably). Relay's own limits
    /// (attachment counts, sizes) and its refusal of duplicate JSON keys stay error replies.
    private mutating func malformed(_ error: ProtocolError, now: Int64) -> [Action] {
        switch error {
        case .duplicateKey, .tooManyAttachments, .binaryPacketTooLarge:
            return refuse(error.relayError, ackID: error.ackID, now: now)
        default:
            guard case .connected = lifecycle else { return refuse(error.relayError, ackID: nil, now: now) }
            return close(code: CloseCode.protocolError, reason: "invalid Socket.IO packet")
        }
    }

    /// Socket.IO DISCONNECT (`41`): the socket leaves, the Engine.IO session stays open (the
    /// protocol's rule: socket.io-client-swift's `socket.disconnect()` keeps its manager
    /// connected and may CONNECT again on it). What held before the first CONNECT holds again:
    /// the CONNECT deadline, the pre-authentication limits; the rooms it leaves are paid from
    /// the join budget, as `room:leave` pays, so a `40`/`41` loop cannot make more presence
    /// events than `room:join`/`room:leave` may.
    private mutating func receiveDisconnect(now: Int64) -> [Action] {
        switch lifecycle {
        case .connected(let login):
            lifecycle = .awaitingConnect(deadline: now + configuration.connectTimeoutMs, left: true)
            limiter.spend(EventPolicyTable.roomLeave.rateClass, count: login.rooms, now: now)
            return [.leave, .limits(limits)]
        case .verifying:
            // Its CONNECT is being verified: a later answer would reach a socket that left.
            lifecycle = .verifying(left: true)
            return close(code: CloseCode.normal, reason: "client disconnected")
        case .awaitingConnect, .closed:
            return []
        }
    }

    private mutating func receiveConnect(_ packet: SocketPacket, now: Int64) -> [Action] {
        switch lifecycle {
        case .connected(let login):
            // A repeated CONNECT is answered again; nothing changes.
            return [.send(login.answer ?? SocketPacket(type: .connect, data: ConnectAnswer(user: login.user).json(sid: socketSID)).encodedMessage())]
        case .verifying, .closed:
            return []
        case .awaitingConnect(_, let left):
            lifecycle = .verifying(left: left)
            do throws(RelayError) {
                var request = try ConnectRequest(data: packet.data, fallbackToken: fallbackToken, maxRooms: configuration.maxRoomsInConnect)
                // Rooms named here are joins like `room:join`'s, from the same budget: the rest
                // are refused `rate_limited` in the answer.
                let allowed = limiter.take(EventPolicyTable.roomJoin.rateClass, count: request.rooms.count, now: now)
                if allowed < request.rooms.count {
                    request.overBudget = Array(request.rooms[allowed...])
                    request.rooms.removeSubrange(allowed...)
                }
                return [.authenticate(request)]
            } catch {
                return refuseConnect(error)
            }
        }
    }

    /// The token was verified and the connection recovered or registered (`.success`), or not.
    /// With `wallMs`, the token's `exp` is enforced: `auth:expiring` ahead of it, the close at
    /// `exp` + leeway.
    public mutating func connectFinished(_ result: Result<ConnectAnswer, RelayError>, now: Int64, wallMs: Int64? = nil) -> [Action] {
        guard case .verifying = lifecycle else { return [] }
        switch result {
        case .failure(let error):
            return refuseConnect(error)
        case .success(let outcome):
            if let sid = outcome.socketSID { socketSID = sid }
            let bytes = SocketPacket(type: .connect, data: outcome.json(sid: socketSID)).encodedMessage()
            let plain = outcome.pid == nil && outcome.rooms.isEmpty && outcome.refused.isEmpty
            var login = SessionLifecycle.Login(user: outcome.user, rooms: outcome.rooms.count, answer: plain ? nil : bytes)
            if let wallMs { login.armTokenExpiry(configuration.tokens, now: now, wallMs: wallMs) }
            lifecycle = .connected(login)
            return [.limits(limits), .send(bytes)]
        }
    }

    /// The socket proved a new token (`auth:refresh`) for the same user: its rooms and expiry
    /// are the new token's from now on.
    public mutating func tokenRefreshed(_ user: AuthenticatedUser, now: Int64, wallMs: Int64) {
        guard case .connected(var login) = lifecycle, login.user.userID == user.userID else { return }
        login.user = user
        login.armTokenExpiry(configuration.tokens, now: now, wallMs: wallMs)
        lifecycle = .connected(login)
    }

    /// CONNECT_ERROR (`44{…}`), then close with 4003. While a WebSocket is being probed the
    /// refusal goes on it too: the client reads whichever transport it moves to next (a
    /// socket.io-client-swift that sends `5` never polls again; a JavaScript client that drops
    /// the probe takes it from its next poll).
    private mutating func refuseConnect(_ error: RelayError) -> [Action] {
        let refusal = SocketPacket(type: .connectError, data: error.connectErrorPayload).encodedMessage()
        let onProbe: [Action] = upgrading ? [.sendProbe(refusal)] : []
        return [.send(refusal)] + onProbe + close(code: CloseCode.authenticationFailed, reason: error.code.rawValue)
    }

    private mutating func receiveEvent(_ packet: SocketPacket, size: Int, now: Int64, wallMs: Int64) -> [Action] {
        guard case .connected(let login) = lifecycle else {
            return fail(RelayError(.notConnected), event: nil, ackID: packet.ackID, now: now)
        }
        let event: InboundEvent
        do {
            event = try InboundEvent(packet: packet)
        } catch {
            // Not an event at all (`42{}`, `42[]`, `42[1]`): malformed, as the protocol says.
            return close(code: CloseCode.protocolError, reason: "invalid Socket.IO packet")
        }
        return dispatch(event, user: login.user, size: size, maxBytes: configuration.maxEventBytes, now: now, wallMs: wallMs)
    }

    /// Budget, policy and validation of one client event; `maxBytes` bounds its encoded size
    /// (an event's JSON, or a binary packet with its attachments).
    private mutating func dispatch(_ event: InboundEvent, user: AuthenticatedUser, size: Int, maxBytes: Int, now: Int64, wallMs: Int64) -> [Action] {
        do throws(RelayError) {
            // Refused names (bad grammar, server-only, custom when disabled) spend the control
            // budget, so a client cannot get unlimited error replies out of the relay.
            let lookup = Result { () throws(RelayError) in
                try EventPolicyTable.policy(forClientEvent: event.name, customEventsEnabled: configuration.customEventsEnabled)
            }
            let rateClass = (try? lookup.get())?.rateClass ?? .control
            guard limiter.allow(rateClass, now: now) else {
                return [.received(event: event.name), .rateLimited(rateClass)] + fail(RelayError(.rateLimited), event: event.name, ackID: event.ackID, now: now)
            }
            let policy = try lookup.get()
            guard size <= maxBytes else {
                throw RelayError(.payloadTooLarge, "events are limited to \(maxBytes) bytes")
            }
            guard inbound.takeEventBytes(size, limits: configuration.budgets.inbound, now: now) else {
                return [.received(event: event.name), .rateLimited(rateClass)] + fail(RelayError(.rateLimited), event: event.name, ackID: event.ackID, now: now)
            }
            let typed = try ClientEvent(event, policy: policy, userID: user.userID, wallMs: wallMs)
            return [.received(event: event.name), .handle(typed, ackID: event.ackID, user: user)]
        } catch {
            return [.received(event: event.name)] + fail(error, event: event.name, ackID: event.ackID, now: now)
        }
    }

    // MARK: Replies

    /// A reply of the server's own to this socket, whichever event it answers and however late.
    public enum Reply: Sendable, Equatable {
        /// The ack of event `id`.
        case ack(id: Int64, payload: JSONValue)
        /// The ack of event `id` with binary attachments (`46`: a `room:sync` page of binary
        /// events); placeholders in `payload` number `attachments`.
        case binaryAck(id: Int64, payload: JSONValue, attachments: [[UInt8]])
        /// An error reply (`fail(_:event:ackID:now:)`).
        case failure(RelayError, event: String?, ackID: Int64?)
    }

    /// The actions for `reply`: nothing once closed; error replies spend their budget.
    public mutating func reply(_ reply: Reply, now: Int64) -> [Action] {
        switch reply {
        case .ack(let id, let payload):
            if lifecycle.isClosed { return [] }
            return [.send(SocketPacket.ackMessage(id: id, payload: payload))]
        case .binaryAck(let id, let payload, let attachments):
            if lifecycle.isClosed { return [] }
            let encoded = BinaryPacket.ack(id: id, payload: payload, attachments: attachments).encoded()
            return [.sendBinary(header: encoded.header, attachments: encoded.attachments)]
        case .failure(let error, let event, let ackID):
            return fail(error, event: event, ackID: ackID, now: now)
        }
    }

    /// An error reply: the error ack when the event asked for one, else an `error` event.
    /// Error replies spend a budget; past it the session closes with 1008 instead of answering.
    public mutating func fail(_ error: RelayError, event: String?, ackID: Int64?, now: Int64) -> [Action] {
        if lifecycle.isClosed { return [] }
        guard errorBudget.tryConsume(1, configuration.budgets.errorReplies, now: now) else {
            return close(code: CloseCode.policyViolation, reason: "too many refused events")
        }
        if let ackID { return [.send(SocketPacket.ackMessage(id: ackID, payload: error.ackPayload))] }
        var body = error.json
        if let event { body = body.setting("event", to: .string(event)) }
        return [.send(SocketPacket.eventMessage(name: "error", payload: body))]
    }
}

extension EngineSession {
    /// The binary packet being assembled: boxed, and only while there is one, so that the
    /// sessions that never see one (nearly all) do not carry the assembler's 112 bytes.
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
