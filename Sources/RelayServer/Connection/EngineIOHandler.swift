import Logging
import NIOCore
import NIOWebSocket
import RelayCore

/// One Engine.IO v4 / Socket.IO v5 session over an upgraded WebSocket.
///
/// Thin transport glue around `EngineSession` (RelayCore), which holds every protocol rule:
/// `WebSocketMessageReader` turns frames into messages, the session turns them into actions,
/// and this type carries the actions out — writes through a bounded `OutboundQueue` whenever
/// the socket is not writable, one timer for the session's next deadline, and the typed client
/// events executed against the `Hub` (`EngineIOHandler+Events`).
final class EngineIOHandler: ChannelInboundHandler, ConnectionSink {
    typealias InboundIn = WebSocketFrame
    typealias OutboundOut = WebSocketFrame

    let connectionID: ConnectionID
    let relay: RelayContext
    let handshake: HandshakeInfo
    var context: ChannelHandlerContext?
    var shard: LoopShard?
    var session: EngineSession
    /// The user this connection registered with the hub as (set once CONNECT succeeded).
    var registeredUser: AuthenticatedUser?
    /// Receipts of this connection waiting for their commit.
    var pendingReceipts = 0
    var outbound: OutboundQueue<OutboundMessage>
    private var reader: WebSocketMessageReader?
    /// The pre-authentication frame guard, removed once CONNECT succeeded.
    var frameGuard: FrameSizeGuard?
    /// A WebSocket pong owed to the peer while the socket was not writable: only the latest
    /// ping is answered (RFC 6455 §5.5.3), so a ping flood cannot grow the write buffer.
    private var pendingPong: ByteBuffer?
    /// The one timer, armed for `session.nextDeadline`.
    private var timer: Scheduled<Void>?
    private var timerDeadline: Int64?
    private var needsFlush = false
    private var flushScheduled = false
    private(set) var closing = false
    var isClosing: Bool { closing }
    /// Why the session ends (metrics and the disconnect log line).
    private var closeReason: String?

    var configuration: RelayConfiguration { relay.configuration }
    var hub: Hub { relay.hub }
    /// The Socket.IO socket id (admin API, logs).
    var sid: String { session.socketSID }

    init(relay: RelayContext, handshake: HandshakeInfo, frameGuard: FrameSizeGuard? = nil) {
        self.relay = relay
        self.handshake = handshake
        self.frameGuard = frameGuard
        self.connectionID = relay.makeConnectionID()
        let c = relay.configuration
        self.session = EngineSession(
            configuration: c.sessionConfiguration, transport: .websocket, engineSID: SessionID.make(), socketSID: SessionID.make(),
            fallbackToken: handshake.queryToken ?? handshake.bearerToken, now: relay.hub.clock.monotonicMs())
        self.outbound = OutboundQueue(softLimitBytes: c.outboundSoftLimitBytes, hardLimitBytes: c.outboundHardLimitBytes, maxCount: c.outboundMaxQueuedMessages)
    }

    // MARK: Lifecycle

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
        self.shard = hub.shard(for: context.eventLoop)
        perform(session.start(now: hub.clock.monotonicMs()))
    }

    func channelInactive(context: ChannelHandlerContext) {
        teardown(reason: "closed")
        context.fireChannelInactive()
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        teardown(reason: "removed")
        self.context = nil
    }

    // MARK: Session actions

    /// Carries out the session's actions in order, then flushes and re-arms the timer.
    func perform(_ actions: [EngineSession.Action]) {
        for action in actions {
            switch action {
            case .send(let bytes): sendText(bytes)
            case .authenticate(let token): authenticate(token)
            case .handle(let event, let ackID, let user): handle(event, ackID: ackID, user: user)
            case .close(let code, let reason): closeTransport(code: code, reason: reason)
            case .received(let name): hub.metrics.eventIn(name)
            case .rateLimited(let rateClass): hub.metrics.rateLimit(rateClass)
            case .sendProbe, .releasePoll, .upgraded, .abortProbe:
                break  // only a session that started on long-polling is upgraded
            }
        }
        flushOutbound()
        armTimer()
    }

    /// One timer for the session's next deadline (heartbeat, pong, CONNECT).
    private func armTimer() {
        guard let context, !closing else { return }
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
        timer = context.eventLoop.assumeIsolated().scheduleTask(in: .milliseconds(delay)) { [weak self] in
            guard let self else { return }
            self.timerDeadline = nil
            self.perform(self.session.tick(now: self.hub.clock.monotonicMs()))
        }
    }

    private func teardown(reason: String) {
        guard !tornDown else { return }
        tornDown = true
        timer?.cancel()
        if outbound.count > 0 { hub.metrics.dropped.increment(by: Int64(outbound.count)) }
        outbound.removeAll()
        pendingPong = nil
        _ = session.close(code: CloseCode.normal, reason: reason)
        let why = closeReason ?? "closed"
        hub.metrics.disconnect(reason: why)
        if let user = registeredUser, let shard {
            hub.unregister(connectionID, sid: sid, user: user.userID, on: shard, deflate: handshake.deflate != nil)
            relay.logger.info("disconnect", metadata: ["sid": "\(sid)", "user": "\(user.userID)", "reason": "\(why)"])
        }
    }

    private var tornDown = false

    static func reason(for code: UInt16) -> String {
        switch code {
        case CloseCode.normal: return "client"
        case CloseCode.goingAway: return "shutdown"
        case CloseCode.pingTimeout: return "ping_timeout"
        case CloseCode.connectTimeout: return "connect_timeout"
        case CloseCode.authenticationFailed: return "auth_failed"
        case CloseCode.kicked: return "kicked"
        case CloseCode.policyViolation: return "policy_violation"
        case CloseCode.slowConsumer: return "slow_consumer"
        case CloseCode.protocolError, CloseCode.unsupportedData, CloseCode.invalidPayloadData, CloseCode.messageTooBig: return "protocol_error"
        default: return "closed"
        }
    }

    // MARK: Inbound frames

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let frame = unwrapInboundIn(data)
        guard !closing else { return }
        // Until CONNECT succeeded, messages are held to the small pre-authentication limit.
        var reader = self.reader ?? WebSocketMessageReader(
            maxMessageBytes: configuration.maxConnectPayload, inflater: handshake.deflate != nil ? shard?.inflater : nil)
        let output = reader.read(frame, allocator: context.channel.allocator)
        self.reader = reader
        switch output {
        case .none, .pong:
            break
        case .message(let opcode, let buffer):
            handleMessage(buffer, opcode: opcode)
        case .ping(let data):
            answerPing(data, context: context)
        case .peerClosed(let code):
            close(code: code, reason: "")
        case .fail(let code, let reason):
            close(code: code, reason: reason)
        }
    }

    /// A whole, valid message (size, UTF-8 and decompression were checked by the reader).
    private func handleMessage(_ buffer: ByteBuffer, opcode: WebSocketOpcode) {
        guard opcode == .text else {
            close(code: CloseCode.unsupportedData, reason: "binary messages are not supported")
            return
        }
        let clock = hub.clock
        let bytes = Array(buffer.readableBytesView)
        perform(session.receive(bytes[...], from: .websocket, now: clock.monotonicMs(), wallMs: clock.wallMs()))
    }

    /// Answers a WebSocket ping at once when the socket drains, else remembers only the latest.
    private func answerPing(_ data: ByteBuffer, context: ChannelHandlerContext) {
        if outbound.isEmpty && pendingPong == nil && context.channel.isWritable {
            context.write(wrapOutboundOut(WebSocketFrame(fin: true, opcode: .pong, data: data)), promise: nil)
            needsFlush = true
            flushOutbound()
        } else {
            pendingPong = data
        }
    }

    /// The socket authenticated: lift the pre-authentication limits.
    func authenticated() {
        reader?.maxMessageBytes = configuration.maxPayload
        if let frameGuard, let context {
            context.pipeline.syncOperations.removeHandler(frameGuard, promise: nil)
        }
        frameGuard = nil
    }

    func errorCaught(context: ChannelHandlerContext, error: Error) {
        if let wsError = error as? NIOWebSocketError {
            switch wsError {
            case .invalidFrameLength: close(code: CloseCode.messageTooBig, reason: "frame too large")
            default: close(code: CloseCode.protocolError, reason: "protocol error")
            }
        } else {
            context.close(promise: nil)
        }
    }

    // MARK: Outbound

    /// Writes an Engine.IO text packet that is not shared with other sockets.
    func sendText(_ bytes: [UInt8]) {
        guard let context else { return }
        var buffer = context.channel.allocator.buffer(capacity: bytes.count)
        buffer.writeBytes(bytes)
        enqueue(OutboundMessage(bytes: buffer))
    }

    func enqueue(_ message: OutboundMessage) {
        guard !closing, let context else { return }
        if outbound.isEmpty && context.channel.isWritable {
            context.write(wrapOutboundOut(frame(for: message, allocator: context.channel.allocator)), promise: nil)
            needsFlush = true
            return
        }
        switch outbound.enqueue(message, bytes: message.bytes.readableBytes, key: message.coalesceKey) {
        case .queued: break
        case .replaced: hub.metrics.coalesced.increment()
        case .overflow:
            hub.metrics.slowConsumerCloses.increment()
            close(code: CloseCode.slowConsumer, reason: "slow consumer")
        }
    }

    /// The frame for a message: compressed (RSV1) when this client negotiated permessage-deflate
    /// and the message is over the threshold, reusing the fan-out's shared compressed bytes when
    /// the client accepts a full window.
    private func frame(for message: OutboundMessage, allocator: ByteBufferAllocator) -> WebSocketFrame {
        if let deflate = handshake.deflate, message.bytes.readableBytes >= configuration.deflateThresholdBytes, let shard {
            let compressed: ByteBuffer
            if deflate.serverMaxWindowBits == 15, let shared = message.compressed {
                compressed = shared
            } else {
                compressed = shard.deflater(windowBits: deflate.serverMaxWindowBits).compress(message.bytes, allocator: allocator)
            }
            return WebSocketFrame(fin: true, rsv1: true, opcode: .text, data: compressed)
        }
        return WebSocketFrame(fin: true, opcode: .text, data: message.bytes)
    }

    func flushOutbound() {
        guard needsFlush, let context else { return }
        needsFlush = false
        context.flush()
    }

    /// Flushes once after the tasks already queued on this loop: acks completed together (a
    /// committed receipt batch) leave in one write instead of one syscall each.
    func flushSoon() {
        guard !flushScheduled, let context else { return }
        flushScheduled = true
        context.eventLoop.assumeIsolated().execute { [weak self] in
            guard let self else { return }
            self.flushScheduled = false
            self.flushOutbound()
        }
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        // Stop reading from a peer that does not read what we write: whatever it sends would
        // only make more replies to buffer. Reading resumes once the writes drain.
        let writable = context.channel.isWritable
        if !closing { try? context.channel.syncOptions?.setOption(ChannelOptions.autoRead, value: writable) }
        drainOutbound()
        context.fireChannelWritabilityChanged()
    }

    private func drainOutbound() {
        guard let context else { return }
        if let pong = pendingPong, context.channel.isWritable {
            pendingPong = nil
            context.write(wrapOutboundOut(WebSocketFrame(fin: true, opcode: .pong, data: pong)), promise: nil)
            needsFlush = true
        }
        while context.channel.isWritable, let message = outbound.dequeue() {
            context.write(wrapOutboundOut(frame(for: message, allocator: context.channel.allocator)), promise: nil)
            needsFlush = true
        }
        flushOutbound()
    }

    func mayAccess(room: String) -> Bool {
        registeredUser?.rooms.allows(room) ?? false
    }

    /// Engine.IO `1` (close) then WebSocket 1001: clients reconnect with their own backoff.
    func goAway() {
        guard !closing else { return }
        perform(session.goAway())
    }

    /// Ends the session with `code` (a hub decision: kick, slow consumer, a broken frame).
    func close(code: UInt16, reason: String) {
        guard !closing else { return }
        perform(session.close(code: code, reason: reason))
    }

    /// Sends a close frame with `code`, then closes the channel.
    private func closeTransport(code: UInt16, reason: String) {
        guard !closing, let context else { return }
        closing = true
        closeReason = Self.reason(for: code)
        timer?.cancel()
        timer = nil
        flushOutbound()
        var data = context.channel.allocator.buffer(capacity: 2 + reason.utf8.count)
        data.writeInteger(code)
        data.writeString(String(reason.prefix(120)))
        let channel = context.channel
        // Keep reading (and discarding) until the peer goes: closing with unread input would
        // send a TCP reset, and the peer would lose the close frame and its code.
        try? channel.syncOptions?.setOption(ChannelOptions.autoRead, value: true)
        // A stalled reader may never take the close frame: do not wait for it for long.
        let deadline = context.eventLoop.scheduleTask(in: .seconds(2)) { channel.close(promise: nil) }
        context.writeAndFlush(wrapOutboundOut(WebSocketFrame(fin: true, opcode: .connectionClose, data: data))).whenComplete { result in
            guard case .success = result else {
                deadline.cancel()
                channel.close(promise: nil)
                return
            }
            // Half-close: the close frame, then FIN; the peer closes its side (or the deadline
            // does). Where half-closure is not supported (TLS), close at once.
            channel.close(mode: .output).whenFailure { _ in
                deadline.cancel()
                channel.close(promise: nil)
            }
        }
    }
}
