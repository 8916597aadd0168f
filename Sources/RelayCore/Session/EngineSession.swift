/// One Engine.IO v4 session carrying one Socket.IO v5 connection to the main namespace, as a
/// value type: fed packets and time, it returns the actions its transport carries out. It
/// knows nothing of sockets, event loops or timers, so every rule (heartbeat, CONNECT,
/// event validation and budgets, the polling → WebSocket upgrade) is tested without a socket.
///
/// Two layers, as the protocols are: the session itself is Engine.IO's — the open packet, the
/// heartbeat, the transport and its upgrade, the inbound packet budget — and it carries the
/// Socket.IO connection (`SocketConnection`: CONNECT, events, acks, error replies), to which it
/// hands each `4` message and attachment.
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
    // Every socket keeps one session for its whole life, so its fields are laid out for size:
    // small ones together, rare state (a binary packet being assembled) boxed and only while
    // it exists, deadlines in 8 bytes, budgets without their (shared) limits.
    /// The Socket.IO connection the session carries: its lifecycle, CONNECT, events, replies.
    public private(set) var socket: SocketConnection
    /// Which transport carries the session and how far an upgrade is (`UpgradeState`).
    public private(set) var upgrade: UpgradeState
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
        self.socket = SocketConnection(
            sid: socketSID, fallbackToken: fallbackToken, shared: shared, connectDeadline: now + configuration.connectTimeoutMs, now: now)
        self.upgrade = transport == .polling ? .polling : .websocket(UpgradeHandover())
        self.engineSID = engineSID
        self.inbound = InboundBudget(limits: configuration.budgets.inbound, now: now)
    }

    /// A new Socket.IO socket on this Engine.IO session (a CONNECT after a `41`) gets its own
    /// id, as the reference server gives one per connect: logs and the admin API tell the two
    /// sockets apart. Only between sockets.
    public mutating func renewSocketSID(_ sid: String) {
        socket.renewSID(sid)
    }

    /// The Socket.IO socket id (`sid` of the CONNECT answer).
    public var socketSID: String { socket.sid }

    /// Where the socket stands (`SessionLifecycle`).
    public var lifecycle: SessionLifecycle { socket.lifecycle }

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
        socket.started(connectDeadline: now + configuration.connectTimeoutMs)
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
        actions += settled(socket.tick(now: now))
        if lifecycle.isClosed { return actions }
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
        settled(socket.close(code: code, reason: reason))
    }

    /// What the socket's actions leave: once it closed (a limit, a refused CONNECT, a packet
    /// that does not parse), the session's heartbeat stops and no upgrade goes on.
    private mutating func settled(_ actions: [Action]) -> [Action] {
        guard lifecycle.isClosed else { return actions }
        nextPingAt = nil
        pongDeadline = nil
        switch upgrade {
        case .polling, .probing: upgrade = .polling
        case .websocket: upgrade = .websocket(UpgradeHandover())
        }
        return actions
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
        if from == .websocket, case .awaitingConnect(_, left: false, refusals: 0) = lifecycle, upgrade.mayHoldForLateConnect(packet, now: now),
            upgrade.holdForLateConnect(packet)
        {
            return []
        }
        // Long-polling carries a binary attachment as `b<base64>`.
        if from == .polling, packet.first == UInt8(ascii: "b") {
            return settled(socket.receiveAttachment(inbound: &inbound, configuration, now: now, wallMs: wallMs) { assembler throws(ProtocolError) in
                try assembler.receiveBase64(packet.dropFirst())
            })
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
            let actions = settled(socket.receive(payload, size: packet.count, inbound: &inbound, configuration, now: now, wallMs: wallMs))
            // A CONNECT that came late by polling (the socket no longer awaits one) goes before
            // what the WebSocket sent after it.
            guard upgrade.isHoldingForLateConnect else { return actions }
            if case .awaitingConnect = lifecycle { return actions }
            return actions + takeHeld(now: now)
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
            actions += settled(socket.receive(packet.dropFirst(), size: packet.count, inbound: &inbound, configuration, now: now, wallMs: 0))
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
        return settled(socket.receiveAttachment(inbound: &inbound, configuration, now: now, wallMs: wallMs) { assembler throws(ProtocolError) in
            try assembler.receiveBinary(bytes)
        })
    }

    // MARK: Socket.IO

    /// The token was verified and the connection recovered or registered (`.success`), or not.
    /// With `wallMs`, the token's `exp` is enforced: `auth:expiring` ahead of it, the close at
    /// `exp` + leeway.
    public mutating func connectFinished(_ result: Result<ConnectAnswer, RelayError>, now: Int64, wallMs: Int64? = nil) -> [Action] {
        settled(socket.connectFinished(result, configuration, now: now, wallMs: wallMs))
    }

    /// The socket proved a new token (`auth:refresh`) for the same user: its rooms and expiry
    /// are the new token's from now on.
    public mutating func tokenRefreshed(_ user: AuthenticatedUser, now: Int64, wallMs: Int64) {
        socket.tokenRefreshed(user, configuration, now: now, wallMs: wallMs)
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
        settled(socket.reply(reply, configuration, now: now))
    }

    /// An error reply: the error ack when the event asked for one, else an `error` event.
    /// Error replies spend a budget; past it the session closes with 1008 instead of answering.
    public mutating func fail(_ error: RelayError, event: String?, ackID: Int64?, now: Int64) -> [Action] {
        settled(socket.fail(error, event: event, ackID: ackID, configuration, now: now))
    }
}
