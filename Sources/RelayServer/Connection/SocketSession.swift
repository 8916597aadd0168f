import Logging
import NIOCore
import RelayCore

/// One client socket as the hub sees it, whatever carries it: drives an `EngineSession`
/// (RelayCore) — feeds it packets and time, carries out its actions — and executes its typed
/// client events against the `Hub` (`SocketSession+Events`, `+Receipts`).
///
/// It lives on one event loop, its *home*: the loop of the WebSocket that opened it, or of the
/// long-polling handshake. Every method is called there. The transport (`SessionTransport`)
/// is a WebSocket or the polling buffer, and changes once when a polling session upgrades.
final class SocketSession: ConnectionSink {
    /// The hub's name for the socket; a new one each time the client CONNECTs again on the same
    /// Engine.IO session (after a `41`).
    private(set) var connectionID: ConnectionID
    let relay: RelayContext
    let handshake: HandshakeInfo
    let eventLoop: any EventLoop
    let shard: LoopShard?
    var session: EngineSession
    /// The current transport; `nil` once the session ended.
    var transport: (any SessionTransport)? {
        didSet { transportAddress = transport.map { Prefetch.address(of: $0) } }
    }
    /// The transport's address, for a fan-out to prefetch it without touching it.
    private var transportAddress: UnsafeRawPointer?
    /// The WebSocket being probed to replace the polling transport.
    var probe: (any SessionTransport)?
    /// The user this connection registered with the hub as (set once CONNECT succeeded).
    var registeredUser: AuthenticatedUser?
    /// Receipts of this connection waiting for their commit.
    var pendingReceipts = 0
    /// This socket takes offsets (opted in to recovery): recoverable events reach it with their
    /// offset as the last argument, and `recoveryLog` tracks where it stands.
    var takesOffsets = false
    /// The private session id (only for sockets that take offsets).
    var pid: String?
    /// When the CONNECT with a pid was answered (monotonic ms): the age a takeover needs.
    var connectedAtMs: Int64?
    var recoveryLog = RecoveryLog()
    /// While CONNECT is being set up (rooms joined, missed events read), hub deliveries wait here
    /// so that the CONNECT answer and the missed events go first. The same bounds as every
    /// outbound queue (bytes and messages): a socket whose CONNECT waits on a slow Redis while
    /// its rooms are busy is closed 4008, not left to grow. Nothing is coalesced here: what is
    /// held is replayed in order against the recovered offsets.
    var holding: OutboundQueue<OutboundMessage>?
    /// Called once when the session ended (the polling registry forgets it).
    var onEnd: (() -> Void)?
    /// Called once when CONNECT succeeded (polling requests may then be larger).
    var onAuthenticated: (() -> Void)?
    private var timer: Scheduled<Void>?
    private var timerDeadline: Int64?
    private var flushScheduled = false
    private(set) var closing = false
    private var ended = false
    /// Why the session ends (metrics and the disconnect log line).
    private var closeReason: ConnectionEnd?
    /// The close code the session ended with, once it is closing.
    private(set) var closeCode: UInt16?

    var configuration: RelayConfiguration { relay.configuration }
    var hub: Hub { relay.hub }
    /// The Socket.IO socket id (admin API, logs).
    var sid: String { session.socketSID }
    var isClosing: Bool { closing }
    private let allocator = ByteBufferAllocator()

    init(relay: RelayContext, handshake: HandshakeInfo, transport: EngineSession.Transport, eventLoop: any EventLoop) {
        self.relay = relay
        self.handshake = handshake
        self.eventLoop = eventLoop
        self.connectionID = relay.makeConnectionID()
        self.shard = relay.hub.shard(for: eventLoop)
        self.session = EngineSession(
            shared: relay.sessionConfiguration, transport: transport, engineSID: SessionID.make(), socketSID: SessionID.make(),
            fallbackToken: handshake.queryToken ?? handshake.bearerToken, now: relay.hub.clock.monotonicMs())
        LiveObjects.created(.session)
    }

    deinit { LiveObjects.released(.session) }

    /// Opens the session on `transport`: the open packet, the timers.
    func start(on transport: any SessionTransport) {
        self.transport = transport
        perform(session.start(now: hub.clock.monotonicMs()))
    }

    // MARK: From the transport

    /// One whole Engine.IO text packet.
    func receive(_ bytes: ArraySlice<UInt8>, from: EngineSession.Transport) {
        let clock = hub.clock
        perform(session.receive(bytes, from: from, now: clock.monotonicMs(), wallMs: clock.wallMs()))
    }

    /// One binary message (a WebSocket binary frame): an attachment.
    func receiveBinary(_ bytes: [UInt8], from: EngineSession.Transport) {
        let clock = hub.clock
        perform(session.receiveBinary(bytes, from: from, now: clock.monotonicMs(), wallMs: clock.wallMs()))
    }

    /// A WebSocket control frame (ping, pong) the transport answered: the budget pays for it.
    func receiveControl(size: Int) {
        let actions = session.receiveControlFrame(size: size, now: hub.clock.monotonicMs())
        if !actions.isEmpty { perform(actions) }
    }

    /// The transport identified by `id` is gone (the socket closed, the poller was told to go).
    func transportClosed(_ id: ObjectIdentifier) {
        if let probe, ObjectIdentifier(probe) == id {
            self.probe = nil
            session.probeClosed()
            (transport as? PollingTransport)?.probeEnded()
            return
        }
        guard let transport, ObjectIdentifier(transport) == id else { return }
        end()
    }

    /// The transport identified by `id` broke a rule or its peer closed: a probe is dropped,
    /// the session's own transport ends the session with `code`.
    func transportFailed(_ id: ObjectIdentifier, code: UInt16, reason: String) {
        if let probe, ObjectIdentifier(probe) == id {
            self.probe = nil
            session.probeClosed()
            (transport as? PollingTransport)?.probeEnded()
            probe.close(code: code, reason: reason)
            return
        }
        guard let transport, ObjectIdentifier(transport) == id else { return }
        close(code: code, reason: reason)
    }

    /// A WebSocket opened for this polling session (`sid` in its URL).
    func probeOpened(_ websocket: any SessionTransport) {
        let actions = session.probeOpened(now: hub.clock.monotonicMs())
        if actions.isEmpty && !closing {
            probe = websocket
            armTimer()
        } else {
            websocket.close(code: CloseCode.protocolError, reason: "no upgrade possible")
        }
    }

    // MARK: Session actions

    /// When a reply's bytes are flushed.
    enum Flush {
        case now
        /// After the tasks already queued on this loop: replies completed together (a committed
        /// receipt batch) leave in one write instead of one syscall each.
        case soon
    }

    /// Carries out the session's actions in order, then flushes and re-arms the timer.
    func perform(_ actions: [EngineSession.Action], flush: Flush = .now) {
        for action in actions {
            switch action {
            case .send(let bytes): sendText(bytes)
            case .sendBinary(let header, let attachments):
                var message = OutboundMessage(bytes: buffer(header))
                message.attachments = attachments.map { ByteBuffer(bytes: $0) }
                send(message)
            case .sendProbe(let bytes):
                probe?.send(OutboundMessage(bytes: buffer(bytes)))
                probe?.flush()
            case .releasePoll: (transport as? PollingTransport)?.releasePendingPoll()
            case .upgraded: upgrade()
            case .abortProbe(let reason):
                probe?.close(code: CloseCode.protocolError, reason: reason)
                probe = nil
                (transport as? PollingTransport)?.probeEnded()
            case .authenticate(let request): authenticate(request)
            case .leave: leave()
            case .handle(let event, let ackID, let user): handle(event, ackID: ackID, user: user)
            case .close(let code, let reason): closeTransport(code: code, reason: reason)
            case .received(let name): hub.metrics.eventIn(name)
            case .rateLimited(let rateClass): hub.metrics.rateLimit(rateClass)
            }
        }
        switch flush {
        case .now: flushOutbound()
        case .soon: if !actions.isEmpty { flushSoon() }
        }
        armTimer()
    }

    /// Every reply of this socket's own — an ack, an error reply, a binary ack — however late it
    /// comes: through the session (nothing once closed; error replies spend their budget).
    func reply(_ reply: EngineSession.Reply, flush: Flush = .now) {
        perform(session.reply(reply, now: hub.clock.monotonicMs()), flush: flush)
    }

    /// The probed WebSocket becomes the transport; what polling still holds goes first.
    private func upgrade() {
        guard let websocket = probe else { return }
        probe = nil
        let old = transport
        transport = websocket
        if let polling = old as? PollingTransport {
            for message in polling.takeUnsent() { websocket.send(message) }
            polling.closeForUpgrade()
        }
        if registeredUser != nil { websocket.authenticated() }
        websocket.flush()
    }

    /// One timer for the session's next deadline (heartbeat, pong, CONNECT, upgrade).
    private func armTimer() {
        guard !closing else { return }
        guard let deadline = session.nextDeadline else {
            timer?.cancel()
            timer = nil
            timerDeadline = nil
            return
        }
        if deadline == timerDeadline { return }
        timer?.cancel()
        timerDeadline = deadline
        let delay = max(0, deadline - hub.clock.monotonicMs())
        // A strong capture: `end` cancels the timer, which releases it. (A weak one would give
        // every session a side table and make each retain on the delivery path a slow one.)
        timer = eventLoop.assumeIsolated().scheduleTask(in: .milliseconds(delay)) { [self] in
            guard !self.ended else { return }
            self.timerDeadline = nil
            self.perform(self.session.tick(now: self.hub.clock.monotonicMs()))
        }
    }

    /// The socket authenticated: its transport lifts the pre-authentication limits.
    func authenticated() {
        transport?.authenticated()
        onAuthenticated?()
        onAuthenticated = nil
    }

    // MARK: Outbound

    private func buffer(_ bytes: [UInt8]) -> ByteBuffer {
        var buffer = allocator.buffer(capacity: bytes.count)
        buffer.writeBytes(bytes)
        return buffer
    }

    /// Writes an Engine.IO text packet of this socket's own (an answer, an ack, a ping): never
    /// held back behind hub deliveries.
    private func sendText(_ bytes: [UInt8]) {
        send(OutboundMessage(bytes: buffer(bytes)))
    }

    /// Writes a packet of this socket's own.
    private func send(_ message: OutboundMessage) {
        guard !closing else { return }
        transport?.send(message)
    }

    /// A hub delivery: held while CONNECT is set up, else written (with its offset for a socket
    /// that takes offsets).
    func enqueue(_ message: OutboundMessage) {
        guard !closing else { return }
        if holding != nil {
            guard holding?.enqueue(message, bytes: message.byteCount) == .queued else {
                hub.metrics.slowConsumerCloses.increment()
                close(code: CloseCode.slowConsumer, reason: "slow consumer")
                return
            }
            return
        }
        write(message)
    }

    /// Writes a hub message: a socket that takes offsets gets the bytes with the offset, and
    /// records where it stands in the stream.
    func write(_ message: OutboundMessage) {
        guard takesOffsets, let stamp = message.stamp else {
            transport?.send(message)
            return
        }
        // In offset order per stream; one the socket already has (a replay raced it) is dropped.
        guard recoveryLog.record(stamp.position.stream, stamp.position.offset) else { return }
        if let offsetMessage = stamp.offsetMessage {
            transport?.send(offsetMessage)
            return
        }
        // Not made for this fan-out (no socket took offsets when it started): this socket's own.
        var message = message
        if let bytes = RecoveryStamp.bytes(of: message.bytes, offset: stamp.position.wire) {
            message.bytes = bytes
            message.compressed = nil
        }
        transport?.send(message)
    }

    /// Starts holding hub deliveries while CONNECT is set up.
    func startHolding() {
        let c = configuration
        holding = OutboundQueue(softLimitBytes: c.outboundHardLimitBytes, hardLimitBytes: c.outboundHardLimitBytes, maxCount: c.outboundMaxQueuedMessages)
    }

    func flushOutbound() {
        transport?.flush()
    }

    func prefetchTransport() {
        Prefetch.lines(transportAddress, count: 4)
    }

    func prefetchChannel() {
        transport?.prefetchChannel()
    }

    /// Flushes once after the tasks already queued on this loop (`Flush.soon`).
    private func flushSoon() {
        guard !flushScheduled else { return }
        flushScheduled = true
        eventLoop.assumeIsolated().execute { [self] in
            self.flushScheduled = false
            self.flushOutbound()
        }
    }

    func mayAccess(room: String) -> Bool {
        registeredUser?.rooms.allows(room) ?? false
    }

    /// Engine.IO `1` (close) then WebSocket 1001: clients reconnect with their own backoff.
    func goAway() {
        guard !closing else { return }
        perform(session.goAway())
    }

    /// Ends the session with `code` (a hub or transport decision: kick, slow consumer, a broken
    /// frame).
    func close(code: UInt16, reason: String) {
        guard !closing else { return }
        perform(session.close(code: code, reason: reason))
    }

    private func closeTransport(code: UInt16, reason: String) {
        guard !closing else { return }
        closing = true
        closeReason = ConnectionEnd(closeCode: code)
        closeCode = code
        timer?.cancel()
        timer = nil
        // With the session's own code: a probe that carried a CONNECT refusal closes 4003.
        probe?.flush()
        probe?.close(code: code, reason: reason)
        probe = nil
        transport?.flush()
        transport?.close(code: code, reason: reason)
    }

    /// The client came back on another connection with this session's pid while this one still
    /// looked alive (a phone's dropped connection sends nothing; the server would notice only at
    /// the ping timeout, or a moment later than the reconnect on a busy machine): close it (4009)
    /// and keep its session for recovery now, so the reconnect recovers it.
    func handOver(pid: String, user: String) -> Bool {
        guard !ended, takesOffsets, let mine = self.pid, mine == pid, let registered = registeredUser, registered.userID == user,
            let since = connectedAtMs, hub.clock.monotonicMs() - since >= configuration.recoveryTakeoverAfterMs
        else { return false }
        relay.logger.info("session handed over to a reconnect", metadata: ["sid": "\(sid)", "user": "\(user)"])
        // Already closing (its transport failed, the channel not closed yet): end it now, with
        // the reason it is closing for, which decides whether the session is kept.
        if !closing { close(code: CloseCode.replaced, reason: "replaced by a reconnect") }
        end()
        return true
    }

    /// Socket.IO DISCONNECT (`41`): the socket leaves the hub for good (not kept for recovery);
    /// the Engine.IO session stays, and a new CONNECT registers it again under a new id.
    private func leave() {
        guard let user = registeredUser, let shard else { return }
        hub.metrics.disconnect(.clientClosed)
        if let pid { hub.untrack(pid: pid, connection: connectionID) }
        hub.unregister(connectionID, sid: sid, user: user.userID, on: shard, deflate: handshake.deflate != nil, takesOffsets: takesOffsets)
        relay.logger.info("disconnect", metadata: ["sid": "\(sid)", "user": "\(user.userID)", "reason": "client"])
        registeredUser = nil
        takesOffsets = false
        pid = nil
        connectedAtMs = nil
        recoveryLog = RecoveryLog()
        holding = nil
        connectionID = relay.makeConnectionID()
        session.renewSocketSID(SessionID.make())
    }

    /// Leaves the hub (rooms, presence, typing, live shares) once the transport is gone.
    private func end() {
        guard !ended else { return }
        ended = true
        closing = true
        timer?.cancel()
        timer = nil
        let why = closeReason ?? .transportClosed
        _ = session.close(code: CloseCode.normal, reason: why.metricLabel)
        transport = nil
        probe?.close(code: CloseCode.goingAway, reason: "session closed")
        probe = nil
        hub.metrics.disconnect(why)
        holding = nil
        if let user = registeredUser, let shard {
            keepForRecovery(user: user, end: why)
            if let pid { hub.untrack(pid: pid, connection: connectionID) }
            hub.unregister(connectionID, sid: sid, user: user.userID, on: shard, deflate: handshake.deflate != nil, takesOffsets: takesOffsets)
            relay.logger.info("disconnect", metadata: ["sid": "\(sid)", "user": "\(user.userID)", "reason": "\(why.metricLabel)"])
        }
        onAuthenticated = nil
        onEnd?()
        onEnd = nil
    }
}
