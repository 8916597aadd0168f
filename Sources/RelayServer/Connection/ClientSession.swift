import Logging
import NIOCore
import RelayBackends
import RelayCore

/// One client's session as the hub sees it, whatever carries it: a thin driver of its
/// `EngineSession` (RelayCore) — feeds it packets and time, carries out its actions — with the
/// transport and probe it writes to and one timer. What the actions ask for is done by types of
/// their own, given the services they use: CONNECT and recovery (`ConnectSetup`, its state in
/// `connectState`), client events (`ClientEventExecutor`), receipts (`SocketReceipts`). The
/// event handlers return their reply and the changes they ask of the socket (`HandlerResult`);
/// only the socket writes them (`carryOut`).
///
/// It lives on one event loop, its *home*: the loop of the WebSocket that opened it, or of the
/// long-polling handshake. Every method is called there. The transport (`SessionTransport`)
/// is a WebSocket or the polling buffer, and changes once when a polling session upgrades.
final class ClientSession: ConnectionSink {
    /// Where the session stands: open, setting up a CONNECT, or ending.
    private enum Lifecycle {
        case open
        /// Its CONNECT (`40`) is being set up — the token, the rooms, a recovery: it counts
        /// among the node's pending CONNECTs (`PendingConnects`) until it is answered or
        /// refused, or the session closes.
        case connecting
        /// Its transport is being closed with `code`; it ends when the transport reports back.
        /// (A session `connecting` is settled first.)
        case closing(code: UInt16)
        /// It left the hub; `code`: the close code it ended with, `nil` when the transport just
        /// went away.
        case ended(code: UInt16?)

        /// A CONNECT arrived: its setup counts among the pending CONNECTs.
        mutating func connectBegan(_ pending: PendingConnects) {
            guard case .open = self else { return }
            self = .connecting
            pending.began()
        }

        /// The CONNECT was answered or refused, or the session closes: it counts no more.
        mutating func connectSettled(_ pending: PendingConnects) {
            guard case .connecting = self else { return }
            self = .open
            pending.ended()
        }
    }

    /// When a reply's bytes are flushed.
    enum Flush {
        case now
        /// After the tasks already queued on this loop: replies completed together (a committed
        /// receipt batch) leave in one write instead of one syscall each.
        case soon
    }

    // Stored in this order on purpose: what a delivery reads (`enqueue`, `deliver`: the
    // lifecycle, the connect state, the transport) in the object's first cache lines, which a
    // fan-out prefetches a few members ahead; small fields together (no padding between them).

    /// The hub's name for the socket; a new one each time the client CONNECTs again on the same
    /// Engine.IO session (after a `41`).
    private(set) var connectionID: ConnectionID
    private var lifecycle = Lifecycle.open
    /// The client negotiated permessage-deflate.
    let deflate: Bool
    private var transports = SessionTransports()
    /// Registration, the CONNECT's setup and the recovery bookkeeping, changed only here, as
    /// `ConnectSetup` asks (`SocketChange`).
    private var connectState = ConnectState<OutboundMessage>()
    let relay: RelayContext
    let partition: LoopPartition
    /// The client's address, as the upgrade or handshake request gave it (logs, the
    /// failed-authentication budget, the admin API).
    let remoteIP: String
    private var timer = SessionTimer()
    /// Made for the first receipt: most sockets never send one.
    private(set) lazy var receipts = SocketReceipts(services: relay.receiptServices)
    /// What a long-polling session's endpoint asked to be told (`onEnd`, `onLimits`).
    private var hooks = PollingHooks()
    private var session: EngineSession

    /// Called once when the session ended (the polling registry forgets it).
    var onEnd: (() -> Void)? {
        get { hooks.onEnd }
        set { hooks.onEnd = newValue }
    }
    /// Called whenever the session's inbound limits change (a polling `POST` may be larger once
    /// connected, small again after a `41`).
    var onLimits: ((LimitsInForce) -> Void)? {
        get { hooks.onLimits }
        set { hooks.onLimits = newValue }
    }

    var eventLoop: any EventLoop { partition.eventLoop }
    var configuration: RelayConfiguration { relay.configuration }
    private var clock: RelayClock { relay.clock }
    /// The user the socket is connected as; `nil` while it is not connected (before its CONNECT
    /// is answered, after a `41`) or once it is closing.
    var connectedUser: AuthenticatedUser? {
        guard !isClosing, case .connected(let user) = session.phase else { return nil }
        return user
    }
    /// Waiting for its CONNECT's token, kept session or history reads (`ConnectSetup` goes on
    /// only while this holds).
    var isAuthenticating: Bool { !isClosing && session.phase == .authenticating }
    /// The Engine.IO session id.
    var engineSID: String { session.engineSID }
    /// The bytes of the deliveries held while the CONNECT is set up.
    var heldBytes: Int { connectState.heldBytes }
    /// The inbound limits in force now.
    var limits: LimitsInForce { session.limits }
    /// Whether the upgraded session still takes a late polling request (`PollingEndpoint`).
    var acceptsPolling: Bool { !isClosing && session.acceptsPolling(now: clock.monotonicMs()) }
    /// The Socket.IO socket id (admin API, logs).
    var sid: String { session.socketSID }
    var isClosing: Bool {
        switch lifecycle {
        case .connecting, .open: return false
        case .closing, .ended: return true
        }
    }
    private var ended: Bool {
        if case .ended = lifecycle { return true }
        return false
    }
    /// The close code the session ended with, once it is closing.
    var closeCode: UInt16? {
        switch lifecycle {
        case .connecting, .open: return nil
        case .closing(let code): return code
        case .ended(let code): return code
        }
    }

    init(relay: RelayContext, handshake: HandshakeInfo, transport: EngineSession.Transport, eventLoop: any EventLoop) {
        self.relay = relay
        self.remoteIP = handshake.remoteIP
        self.deflate = handshake.deflate != nil
        self.connectionID = relay.makeConnectionID()
        self.partition = relay.partition(for: eventLoop)
        self.session = EngineSession(
            shared: relay.sessionConfiguration, transport: transport, engineSID: RandomID.make(), socketSID: RandomID.make(),
            fallbackToken: handshake.queryToken ?? handshake.bearerToken, now: relay.clock.monotonicMs())
        LiveObjects.created(.session)
    }

    deinit {
        // A session dropped before it ended still gives its place back.
        if case .connecting = lifecycle { relay.admission.pending.ended() }
        LiveObjects.released(.session)
    }



    /// Opens the session on `transport`: the open packet, the timers.
    func start(on transport: any SessionTransport) {
        transports.current = transport
        perform(session.start(now: clock.monotonicMs()))
    }

    // MARK: From the transport

    /// One whole Engine.IO text packet.
    func receive(_ bytes: ArraySlice<UInt8>, from: EngineSession.Transport) {
        let clock = clock
        perform(session.receive(bytes, from: from, now: clock.monotonicMs(), wallMs: clock.wallMs()))
    }

    /// One binary message (a WebSocket binary frame): an attachment.
    func receiveBinary(_ bytes: [UInt8], from: EngineSession.Transport) {
        let clock = clock
        perform(session.receiveBinary(bytes, from: from, now: clock.monotonicMs(), wallMs: clock.wallMs()))
    }

    /// A WebSocket frame that is not a whole message (a control frame the transport answered, a
    /// fragment): the budget pays for it.
    func receiveFrame(size: Int) {
        let actions = session.receiveFrame(size: size, now: clock.monotonicMs())
        if !actions.isEmpty { perform(actions) }
    }

    /// The transport identified by `id` is gone (the socket closed, the poller was told to go).
    func transportClosed(_ id: ObjectIdentifier) {
        if transports.isProbe(id) {
            transports.probe = nil
            session.probeClosed()
            transports.current?.probeEnded()
            return
        }
        guard transports.isCurrent(id) else { return }
        end()
    }

    /// The transport identified by `id` broke a rule or its peer closed: a probe is dropped,
    /// the session's own transport ends the session with `code`.
    func transportFailed(_ id: ObjectIdentifier, code: UInt16, reason: String) {
        if transports.isProbe(id), let probe = transports.takeProbe() {
            session.probeClosed()
            transports.current?.probeEnded()
            probe.close(code: code, reason: reason)
            return
        }
        guard transports.isCurrent(id) else { return }
        close(code: code, reason: reason)
    }

    /// A WebSocket opened for this polling session (`sid` in its URL).
    func probeOpened(_ websocket: any SessionTransport) {
        let actions = session.probeOpened(now: clock.monotonicMs())
        if actions.isEmpty && !isClosing {
            transports.probe = websocket
            websocket.apply(session.limits)
            armTimer()
        } else {
            websocket.close(code: CloseCode.protocolError, reason: "no upgrade possible")
        }
    }

    // MARK: Session actions

    /// Carries out the session's actions in order, then flushes and re-arms the timer.
    private func perform(_ actions: [EngineSession.Action], flush: Flush = .now) {
        for action in actions {
            switch action {
            // A packet of this socket's own (an answer, an ack, a ping): never held back behind
            // hub deliveries.
            case .send(let bytes):
                guard !isClosing else { continue }
                transports.current?.send(OutboundMessage(bytes: ByteBuffer(bytes: bytes)))
            case .sendBinary(let header, let attachments):
                guard !isClosing else { continue }
                var message = OutboundMessage(bytes: ByteBuffer(bytes: header))
                message.attachments = attachments.map { ByteBuffer(bytes: $0) }
                transports.current?.send(message)
            case .sendProbe(let bytes):
                let probe = transports.probe
                probe?.send(OutboundMessage(bytes: ByteBuffer(bytes: bytes)))
                probe?.flush()
            case .releasePoll: transports.current?.releasePendingPoll()
            case .upgraded: upgrade()
            case .abortProbe(let reason):
                let probe = transports.probe
                probe?.close(code: CloseCode.protocolError, reason: reason)
                transports.probe = nil
                transports.current?.probeEnded()
            case .authenticate(let request):
                lifecycle.connectBegan(relay.admission.pending)
                ConnectSetup(services: relay.connect, socket: self).authenticate(request)
            case .leave: leave()
            case .limits(let limits):
                // Every transport enforces them, the probe too.
                transports.current?.apply(limits)
                transports.probe?.apply(limits)
                onLimits?(limits)
            case .handle(let event, let ackID, let user):
                carryOut(ClientEventExecutor(services: relay.events, socket: self, user: user).run(event, ackID: ackID), for: connectionID)
            case .close(let code, let reason): closeTransport(code: code, reason: reason)
            case .received(let name): relay.metrics.events.eventIn(name)
            case .rateLimited(let rateClass): relay.metrics.events.rateLimit(rateClass)
            }
        }
        switch flush {
        case .now:
            flushOutbound()
        case .soon:
            guard !actions.isEmpty, !transports.flushScheduled else { break }
            transports.flushScheduled = true
            eventLoop.assumeIsolated().execute { [self] in
                self.transports.flushScheduled = false
                self.flushOutbound()
            }
        }
        armTimer()
    }

    /// Carries out what a handler returned for an event of `connection` (this socket's id when
    /// the event came): its changes to the socket's state — only while the socket is still that
    /// connection, not closing — then its reply, through the session (nothing once closed;
    /// error replies spend their budget), then what follows the reply. A later result is
    /// carried out when it completes, on this loop.
    func carryOut(_ result: HandlerResult, for connection: ConnectionID) {
        let update: SocketUpdate
        switch result {
        case .now(let now): update = now
        case .later(let future):
            let bound = NIOLoopBound(self, eventLoop: eventLoop)
            future.whenSuccess { bound.value.carryOut(.now($0), for: connection) }
            return
        }
        if connection == connectionID {
            // In the order asked; a change may close the socket (a refused CONNECT): the rest are
            // not carried out.
            for change in update.changes where !isClosing {
                switch change {
                case .joined(let stream, let head): connectState.join(stream, at: head)
                case .left(let stream): connectState.unfollow(stream)
                case .refreshed(let user):
                    connectState.refreshed(user)
                    session.tokenRefreshed(user, now: clock.monotonicMs(), wallMs: clock.wallMs())
                case .connecting(let takesOffsets): connectState.begin(takesOffsets: takesOffsets)
                case .registering(let user, let held): connectState.register(user, holdingIn: held)
                case .registrationRefused: connectState.registrationRefused()
                case .assigned(let pid): connectState.assign(pid: pid)
                case .following(let stream, let head): connectState.follow(stream, from: head)
                case .answered(let answer):
                    lifecycle.connectSettled(relay.admission.pending)
                    let now = clock.monotonicMs()
                    connectState.answered(atMs: now)
                    perform(session.connectFinished(.success(answer), now: now, wallMs: clock.wallMs()))
                case .refused(let error):
                    lifecycle.connectSettled(relay.admission.pending)
                    perform(session.connectFinished(.failure(error), now: clock.monotonicMs()))
                case .replayed(let missed): for message in missed { deliver(message) }
                case .released(let positions):
                    let held = connectState.release(after: positions) { message in
                        message.stamp.map { (stream: $0.position.stream, offset: $0.position.offset) }
                    }
                    for message in held { deliver(message) }
                    flushOutbound()
                }
            }
        }
        if let reply = update.reply {
            perform(session.reply(reply, now: clock.monotonicMs()), flush: update.flush)
        } else if update.changes.contains(where: { if case .refreshed = $0 { return true } else { return false } }) {
            // A refreshed token without a reply: only the timer follows the new expiry. (The
            // CONNECT's steps that write — answered, refused, released — flush themselves.)
            perform([], flush: update.flush)
        }
        update.afterReply?()
    }

    /// The probed WebSocket becomes the transport; what polling still holds goes first.
    private func upgrade() {
        guard let websocket = transports.takeProbe() else { return }
        let old = transports.current
        transports.current = websocket
        if let old {
            for message in old.takeUnsent() { websocket.send(message) }
            old.closeForUpgrade()
        }
        websocket.apply(session.limits)
        websocket.flush()
    }

    /// One timer for the session's next deadline (heartbeat, pong, CONNECT, upgrade).
    private func armTimer() {
        guard !isClosing else { return }
        // The loop holds the session until the timer fires or `end` cancels it. (A weak hold
        // would give every session a side table and make each retain on the delivery path a
        // slow one.)
        timer.set(for: session.nextDeadline, now: clock.monotonicMs(), on: eventLoop, owner: self)
    }

    // MARK: Outbound

    /// A hub delivery: held while CONNECT is set up, else written (with its offset for a socket
    /// that takes offsets).
    func enqueue(_ message: OutboundMessage) {
        guard !isClosing else { return }
        // Asked first: the size is read only for a message that may be held.
        guard connectState.isHolding else { return deliver(message) }
        switch connectState.hold(message, bytes: message.byteCount) {
        case .writeNow: deliver(message)
        case .held: return
        case .overflow:
            relay.metrics.delivery.slowConsumerCloses.increment()
            close(code: CloseCode.slowConsumer, reason: "slow consumer")
        }
    }

    /// Writes a hub message: a socket that takes offsets gets the bytes with the offset, and
    /// records where it stands in the stream.
    private func deliver(_ message: OutboundMessage) {
        guard connectState.takesOffsets, let stamp = message.stamp else {
            transports.current?.send(message)
            return
        }
        // In offset order per stream; one the socket already has (a replay raced it) is dropped.
        guard connectState.record(stamp.position.stream, stamp.position.offset) else { return }
        if let offsetMessage = stamp.offsetMessage(of: message) {
            transports.current?.send(offsetMessage)
            return
        }
        // Not made for this fan-out (no socket took offsets when it started): this socket's own.
        var message = message
        if let bytes = RecoveryStamp.bytes(of: message.bytes, offset: stamp.position.wire) {
            message.bytes = bytes
            message.compressed = nil
        }
        transports.current?.send(message)
    }

    func flushOutbound() {
        transports.current?.flush()
    }

    func prefetchTransport() {
        Prefetch.lines(transports.address, count: 4)
    }

    func prefetchChannel() {
        transports.current?.prefetchChannel()
    }

    func mayAccess(room: String) -> Bool {
        guard let user = connectState.user else { return false }
        return DeliveryGate.admits(user, room: room)
    }

    // MARK: Ending

    /// Engine.IO `1` (close) then WebSocket 1001: clients reconnect with their own backoff.
    func goAway() {
        guard !isClosing else { return }
        perform(session.goAway())
    }

    /// Ends the session with `code` (a hub or transport decision: kick, slow consumer, a broken
    /// frame).
    func close(code: UInt16, reason: String) {
        guard !isClosing else { return }
        perform(session.close(code: code, reason: reason))
    }

    private func closeTransport(code: UInt16, reason: String) {
        guard !isClosing else { return }
        lifecycle.connectSettled(relay.admission.pending)
        lifecycle = .closing(code: code)
        timer.cancel()
        // With the session's own code: a probe that carried a CONNECT refusal closes 4003.
        let probe = transports.probe
        probe?.flush()
        probe?.close(code: code, reason: reason)
        transports.probe = nil
        let transport = transports.current
        transport?.flush()
        transport?.close(code: code, reason: reason)
    }

    /// The client came back on another connection with this session's pid while this one still
    /// looked alive (a phone's dropped connection sends nothing; the server would notice only at
    /// the ping timeout, or a moment later than the reconnect on a busy machine): close it (4009)
    /// and keep its session for recovery now, so the reconnect recovers it.
    func handOver(pid: String, user: String) -> Bool {
        guard !ended,
            connectState.mayHandOver(pid: pid, userID: user, nowMs: clock.monotonicMs(), afterMs: configuration.recovery.takeoverAfterMs)
        else { return false }
        relay.logger.info("session handed over to a reconnect", metadata: ["sid": "\(sid)", "user": "\(user)"])
        // Already closing (its transport failed, the channel not closed yet): end it now, with
        // the reason it is closing for, which decides whether the session is kept.
        if !isClosing { close(code: CloseCode.replaced, reason: "replaced by a reconnect") }
        end()
        return true
    }

    /// Socket.IO DISCONNECT (`41`): the socket leaves the hub for good (not kept for recovery);
    /// the Engine.IO session stays, and a new CONNECT registers it again under a new id.
    private func leave() {
        guard let user = connectState.user else { return }
        relay.metrics.connections.disconnect(.clientClosed)
        ConnectSetup(services: relay.connect, socket: self).unregister(
            user, pid: connectState.pid, takesOffsets: connectState.takesOffsets, end: .clientClosed, left: true)
        connectState = ConnectState()
        connectionID = relay.makeConnectionID()
        session.renewSocketSID(RandomID.make())
    }

    /// Leaves the hub (rooms, presence, typing, live shares) once the transport is gone.
    private func end() {
        guard !ended else { return }
        let why = closeCode.map(ConnectionEnd.init(closeCode:)) ?? .transportClosed
        lifecycle.connectSettled(relay.admission.pending)
        lifecycle = .ended(code: closeCode)
        timer.cancel()
        _ = session.close(code: CloseCode.normal, reason: why.metricLabel)
        transports.current = nil
        let probe = transports.probe
        probe?.close(code: CloseCode.goingAway, reason: "session closed")
        transports.probe = nil
        relay.metrics.connections.disconnect(why)
        if let user = connectState.user {
            let setup = ConnectSetup(services: relay.connect, socket: self)
            let (sid, wallMs, left) = (self.sid, clock.wallMs(), session.clientDisconnected)
            setup.keepForRecovery(connectState.keptRecord(socketSID: sid, end: why, clientDisconnected: left, wallMs: wallMs))
            setup.unregister(user, pid: connectState.pid, takesOffsets: connectState.takesOffsets, end: why)
        }
        // Nothing is held or followed any more.
        connectState = ConnectState()
        onLimits = nil
        let hook = onEnd
        onEnd = nil
        hook?()
    }
}

extension ClientSession: SessionTimerOwner {
    /// The session's timer passed (`armTimer`): the heartbeat, pong, CONNECT, upgrade or token
    /// deadline it was set for. A callback replaced or cancelled after NIO took it out of its
    /// queue does nothing.
    func sessionTimerFired(generation: UInt32) {
        guard !ended, timer.fired(generation) else { return }
        perform(session.tick(now: clock.monotonicMs()))
    }
}
