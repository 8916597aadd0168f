import Logging
import NIOCore
import NIOWebSocket
import RelayCore

/// One Engine.IO v4 / Socket.IO v5 session over an upgraded WebSocket.
///
/// Thin transport glue: `WebSocketMessageReader` turns frames into messages, this type runs
/// the heartbeat, and `EngineIOHandler+Events` the CONNECT handshake and event dispatch (the
/// rules themselves live in RelayCore and the `Hub`). Outbound messages go through a bounded
/// `OutboundQueue` whenever the socket is not writable.
final class EngineIOHandler: ChannelInboundHandler, ConnectionSink {
    typealias InboundIn = WebSocketFrame
    typealias OutboundOut = WebSocketFrame

    enum Phase {
        case awaitingConnect
        case authenticating
        case connected(AuthenticatedUser)
        case closed
    }

    let connectionID: ConnectionID
    let sid: String
    let engineSID: String
    let relay: RelayContext
    let handshake: HandshakeInfo
    var context: ChannelHandlerContext?
    var shard: LoopShard?
    var phase = Phase.awaitingConnect
    var limiter: EventRateLimiter
    /// Error replies this connection may still cause (then 1008).
    var errorBudget: TokenBucket
    /// Receipts of this connection waiting for their commit.
    var pendingReceipts = 0
    var outbound: OutboundQueue<OutboundMessage>
    private var reader: WebSocketMessageReader?
    /// The pre-authentication frame guard, removed once CONNECT succeeded.
    var frameGuard: FrameSizeGuard?
    /// A WebSocket pong owed to the peer while the socket was not writable: only the latest
    /// ping is answered (RFC 6455 §5.5.3), so a ping flood cannot grow the write buffer.
    private var pendingPong: ByteBuffer?
    private var pingTask: Scheduled<Void>?
    private var pongTimeout: Scheduled<Void>?
    var connectTimeout: Scheduled<Void>?
    private var needsFlush = false
    private var flushScheduled = false
    private(set) var closing = false
    var isClosing: Bool { closing }
    /// Why the session ends (metrics and the disconnect log line).
    private var closeReason: String?

    var configuration: RelayConfiguration { relay.configuration }
    var hub: Hub { relay.hub }

    init(relay: RelayContext, handshake: HandshakeInfo, frameGuard: FrameSizeGuard? = nil) {
        self.relay = relay
        self.handshake = handshake
        self.frameGuard = frameGuard
        self.connectionID = relay.makeConnectionID()
        self.sid = SessionID.make()
        self.engineSID = SessionID.make()
        let c = relay.configuration
        self.limiter = EventRateLimiter(overall: c.eventsPerSecond, perClass: c.eventsPerSecondByClass, now: relay.hub.clock.monotonicMs())
        self.errorBudget = TokenBucket(capacity: c.errorReplies.burst, ratePerSecond: c.errorReplies.perSecond, now: relay.hub.clock.monotonicMs())
        self.outbound = OutboundQueue(softLimitBytes: c.outboundSoftLimitBytes, hardLimitBytes: c.outboundHardLimitBytes, maxCount: c.outboundMaxQueuedMessages)
    }

    // MARK: Lifecycle

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
        self.shard = hub.shard(for: context.eventLoop)
        let open = EnginePacket.openPayload(
            sid: engineSID, pingInterval: configuration.pingIntervalMs, pingTimeout: configuration.pingTimeoutMs,
            maxPayload: configuration.maxPayload)
        sendText(open)
        flushOutbound()
        connectTimeout = context.eventLoop.assumeIsolated().scheduleTask(in: .milliseconds(Int64(configuration.connectTimeoutMs))) { [weak self] in
            guard let self, case .awaitingConnect = self.phase else { return }
            self.close(code: CloseCode.connectTimeout, reason: "connect timeout")
        }
        schedulePing()
    }

    func channelInactive(context: ChannelHandlerContext) {
        teardown(reason: "closed")
        context.fireChannelInactive()
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        teardown(reason: "removed")
        self.context = nil
    }

    private func teardown(reason: String) {
        if case .closed = phase { return }
        pingTask?.cancel()
        pongTimeout?.cancel()
        connectTimeout?.cancel()
        if outbound.count > 0 { hub.metrics.dropped.increment(by: Int64(outbound.count)) }
        outbound.removeAll()
        pendingPong = nil
        let why = closeReason ?? "closed"
        hub.metrics.disconnect(reason: why)
        if case .connected(let user) = phase, let shard {
            hub.unregister(connectionID, sid: sid, user: user.userID, on: shard, deflate: handshake.deflate != nil)
            relay.logger.info("disconnect", metadata: ["sid": "\(sid)", "user": "\(user.userID)", "reason": "\(why)"])
        }
        phase = .closed
    }

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

    // MARK: Heartbeat

    /// Engine.IO v4 heartbeat: ping `pingInterval` after the previous pong (or the open), then
    /// close with 4000 unless the pong comes within `pingTimeout`.
    private func schedulePing() {
        guard let context else { return }
        pingTask = context.eventLoop.assumeIsolated().scheduleTask(in: .milliseconds(Int64(configuration.pingIntervalMs))) { [weak self] in
            guard let self, !self.closing, let context = self.context else { return }
            self.sendText(EnginePacket.pingFrame)
            self.flushOutbound()
            self.pongTimeout = context.eventLoop.assumeIsolated().scheduleTask(in: .milliseconds(Int64(self.configuration.pingTimeoutMs))) { [weak self] in
                self?.close(code: CloseCode.pingTimeout, reason: "ping timeout")
            }
        }
    }

    private func pongReceived() {
        guard let timeout = pongTimeout else { return }  // a pong nobody asked for
        timeout.cancel()
        pongTimeout = nil
        schedulePing()
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
        let bytes = buffer.readableBytesView
        let array = Array(bytes)
        let packet: EnginePacket
        do {
            packet = try EnginePacket.decode(array[...])
        } catch {
            close(code: CloseCode.protocolError, reason: "invalid Engine.IO packet")
            return
        }
        switch packet {
        case .pong:
            pongReceived()
        case .ping(let data):
            sendText(Array(("3" + data).utf8))
            flushOutbound()
        case .close:
            close(code: CloseCode.normal, reason: "client closed")
        case .message(let payload):
            handleSocketPacket(payload, size: array.count)
        case .upgrade, .noop:
            break
        case .open:
            close(code: CloseCode.protocolError, reason: "clients do not send open packets")
        }
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
        if case .connected(let user) = phase { return user.rooms.allows(room) }
        return false
    }

    /// Engine.IO `1` (close) then WebSocket 1001: clients reconnect with their own backoff.
    func goAway() {
        guard !closing else { return }
        sendText(EnginePacket.closeFrame)
        close(code: CloseCode.goingAway, reason: "server shutting down")
    }

    /// Sends a close frame with `code`, then closes the channel.
    func close(code: UInt16, reason: String) {
        guard !closing, let context else { return }
        closing = true
        closeReason = Self.reason(for: code)
        pingTask?.cancel()
        pongTimeout?.cancel()
        connectTimeout?.cancel()
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
