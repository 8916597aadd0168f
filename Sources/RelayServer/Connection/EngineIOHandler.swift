import Logging
import NIOCore
import NIOWebSocket
import RelayCore

/// One Engine.IO v4 / Socket.IO v5 session over an upgraded WebSocket.
///
/// Thin transport glue: it assembles frames into messages, runs the heartbeat and the CONNECT
/// handshake, and hands events to `EventDispatcher` logic (see `EngineIOHandler+Events`). Outbound
/// messages go through a bounded `OutboundQueue` whenever the socket is not writable.
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
    var outbound: OutboundQueue<OutboundMessage>
    private var fragments: ByteBuffer?
    private var fragmentOpcode: WebSocketOpcode = .text
    private var pingTask: Scheduled<Void>?
    private var pongTimeout: Scheduled<Void>?
    var connectTimeout: Scheduled<Void>?
    private var needsFlush = false
    private var flushScheduled = false
    private(set) var closing = false

    var configuration: RelayConfiguration { relay.configuration }
    var hub: Hub { relay.hub }

    init(relay: RelayContext, handshake: HandshakeInfo) {
        self.relay = relay
        self.handshake = handshake
        self.connectionID = relay.makeConnectionID()
        self.sid = SessionID.make()
        self.engineSID = SessionID.make()
        let c = relay.configuration
        self.limiter = EventRateLimiter(overall: c.eventsPerSecond, perClass: c.eventsPerSecondByClass, now: relay.hub.clock.monotonicMs())
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
        pingTask?.cancel()
        pongTimeout?.cancel()
        connectTimeout?.cancel()
        outbound.removeAll()
        if case .connected(let user) = phase, let shard {
            hub.unregister(connectionID, sid: sid, user: user.userID, on: shard)
            relay.logger.info("disconnect", metadata: ["sid": "\(sid)", "user": "\(user.userID)", "reason": "\(reason)"])
        }
        phase = .closed
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
        guard frame.maskKey != nil else {
            close(code: CloseCode.protocolError, reason: "client frames must be masked")
            return
        }
        guard !frame.rsv1, !frame.rsv2, !frame.rsv3 else {
            close(code: CloseCode.protocolError, reason: "reserved bits set without an extension")
            return
        }
        switch frame.opcode {
        case .text, .binary:
            guard fragments == nil else {
                close(code: CloseCode.protocolError, reason: "new message before the previous one finished")
                return
            }
            if frame.fin {
                handleMessage(frame.unmaskedData, opcode: frame.opcode)
            } else {
                fragmentOpcode = frame.opcode
                fragments = frame.unmaskedData
                checkFragmentSize()
            }
        case .continuation:
            guard var buffer = fragments else {
                close(code: CloseCode.protocolError, reason: "continuation without a message")
                return
            }
            var data = frame.unmaskedData
            buffer.writeBuffer(&data)
            fragments = buffer
            guard checkFragmentSize() else { return }
            if frame.fin {
                fragments = nil
                handleMessage(buffer, opcode: fragmentOpcode)
            }
        case .ping:
            var pong = context.channel.allocator.buffer(capacity: frame.length)
            var data = frame.unmaskedData
            pong.writeBuffer(&data)
            context.writeAndFlush(wrapOutboundOut(WebSocketFrame(fin: true, opcode: .pong, data: pong)), promise: nil)
        case .pong:
            break
        case .connectionClose:
            var data = frame.unmaskedData
            // Echo a valid status code (RFC 6455 §5.5.1); refuse a malformed one.
            if data.readableBytes == 0 {
                close(code: CloseCode.normal, reason: "")
            } else if let code = data.readInteger(as: UInt16.self), CloseCode.isValidReceived(code) {
                if data.readableBytes > 0, String(validating: data.readableBytesView, as: UTF8.self) == nil {
                    close(code: CloseCode.invalidPayloadData, reason: "invalid UTF-8 in close reason")
                } else {
                    close(code: code, reason: "")
                }
            } else {
                close(code: CloseCode.protocolError, reason: "invalid close code")
            }
        default:
            close(code: CloseCode.protocolError, reason: "unknown opcode")
        }
    }

    @discardableResult
    private func checkFragmentSize() -> Bool {
        if let f = fragments, f.readableBytes > configuration.maxPayload {
            fragments = nil
            close(code: CloseCode.messageTooBig, reason: "message exceeds maxPayload")
            return false
        }
        return true
    }

    private func handleMessage(_ buffer: ByteBuffer, opcode: WebSocketOpcode) {
        guard buffer.readableBytes <= configuration.maxPayload else {
            close(code: CloseCode.messageTooBig, reason: "message exceeds maxPayload")
            return
        }
        guard opcode == .text else {
            close(code: CloseCode.unsupportedData, reason: "binary messages are not supported")
            return
        }
        let bytes = buffer.readableBytesView
        guard String(validating: bytes, as: UTF8.self) != nil else {
            close(code: CloseCode.invalidPayloadData, reason: "invalid UTF-8")
            return
        }
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
            context.write(wrapOutboundOut(WebSocketFrame(fin: true, opcode: .text, data: message.bytes)), promise: nil)
            needsFlush = true
            return
        }
        switch outbound.enqueue(message, bytes: message.bytes.readableBytes, key: message.coalesceKey) {
        case .queued, .replaced: break
        case .overflow: close(code: CloseCode.slowConsumer, reason: "slow consumer")
        }
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
        drainOutbound()
        context.fireChannelWritabilityChanged()
    }

    private func drainOutbound() {
        guard let context else { return }
        while context.channel.isWritable, let message = outbound.dequeue() {
            context.write(wrapOutboundOut(WebSocketFrame(fin: true, opcode: .text, data: message.bytes)), promise: nil)
            needsFlush = true
        }
        flushOutbound()
    }

    /// Sends a close frame with `code`, then closes the channel.
    func close(code: UInt16, reason: String) {
        guard !closing, let context else { return }
        closing = true
        pingTask?.cancel()
        pongTimeout?.cancel()
        connectTimeout?.cancel()
        flushOutbound()
        var data = context.channel.allocator.buffer(capacity: 2 + reason.utf8.count)
        data.writeInteger(code)
        data.writeString(String(reason.prefix(120)))
        let channel = context.channel
        // A stalled reader may never take the close frame: do not wait for it for long.
        let deadline = context.eventLoop.scheduleTask(in: .seconds(2)) { channel.close(promise: nil) }
        context.writeAndFlush(wrapOutboundOut(WebSocketFrame(fin: true, opcode: .connectionClose, data: data))).whenComplete { _ in
            deadline.cancel()
            channel.close(promise: nil)
        }
    }
}
