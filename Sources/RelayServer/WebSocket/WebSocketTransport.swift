import Logging
import NIOCore
import NIOWebSocket
import RelayBackends
import RelayCore
import RelayLocks

/// An Engine.IO session's WebSocket: frames in, frames out, nothing of the protocol.
///
/// `WebSocketMessageReader` turns frames into whole messages (masking, fragments, UTF-8,
/// permessage-deflate, size caps) and hands them to the `ClientSession`; packets the session
/// sends are framed (compressed once per fan-out when negotiated) and written through a bounded
/// `OutboundQueue` whenever the socket is not writable. Until CONNECT succeeds, a small
/// pre-authentication limit applies to frames (at their header, in the codec) and messages.
///
/// A socket that opens a session has it on its own loop (no hop). A socket that upgrades a
/// long-polling session may live on another loop than the session: then every call between
/// them hops, batched per flush (`CrossLoopTransport`).
final class WebSocketTransport: ChannelInboundHandler, SessionTransport {
    typealias InboundIn = WebSocketFrame
    typealias OutboundOut = WebSocketFrame

    let relay: RelayContext
    /// What the socket starts when it is added to the pipeline: a session of its own, or the
    /// upgrade of a polling session. Dropped once started.
    private var start: Start?
    /// permessage-deflate, when negotiated (all the transport needs of the handshake).
    let deflate: PerMessageDeflateNegotiation?
    var context: ChannelHandlerContext?
    /// Where frames made once per fan-out are written from: the frame encoder's context (the
    /// socket's `WebSocketFrameCodec`, or NIO's encoder in tests). `nil` without one (tests).
    private var readyFrames: ReadyFramePath?
    /// The socket's frame codec, told the frame limit in force (`nil` in tests without one).
    private var codec: WebSocketFrameCodec?
    var partition: LoopPartition?
    /// The session: its own (a new session) or a polling session's (an upgrade probe).
    private(set) var link: SessionLink?
    private var outbound: OutboundQueue<OutboundMessage>
    /// Frames into messages, under the pre-authentication limits until CONNECT succeeded.
    private var inbound: InboundAssembly
    private var writes = WriteState()
    private var ending = Ending.open

    /// What the write side knows between calls.
    private struct WriteState {
        /// The channel's writability, as its last `channelWritabilityChanged` said (read per
        /// delivery: cheaper than asking the channel).
        var writable = true
        /// Written and not flushed yet.
        var needsFlush = false
        /// A WebSocket pong owed to the peer while the socket was not writable: only the latest
        /// ping is answered (RFC 6455 §5.5.3), so a ping flood cannot grow the write buffer.
        var pendingPong: ByteBuffer?
    }

    private enum Ending {
        case open
        /// The relay's close frame is on its way: nothing more is read or sent.
        case closing
        /// The relay's close frame is written: the connection closes when the peer's close frame
        /// comes (the closing handshake, RFC 6455 §7.1.1), when the peer goes, or at the deadline.
        case closeSent
        /// The channel is gone and the session told.
        case tornDown
    }

    var configuration: RelayConfiguration { relay.configuration }

    /// - Parameter probeOf: the polling session this socket upgrades (its URL had a `sid`).
    init(relay: RelayContext, handshake: HandshakeInfo, probeOf: PollingRegistry.Handle? = nil) {
        self.relay = relay
        self.start = probeOf.map { .upgrade($0) } ?? .session(HandshakeBox(info: handshake))
        self.deflate = handshake.deflate
        // A new socket starts under the pre-authentication limits; a probe gets its session's
        // limits in force as soon as it is linked (`apply`).
        self.inbound = InboundAssembly(
            limits: LimitsInForce(maxMessageBytes: min(relay.configuration.engine.maxConnectPayload, relay.configuration.engine.maxPayload), preAuthentication: true))
        let c = relay.configuration.connections
        self.outbound = OutboundQueue(softLimitBytes: c.outboundSoftLimitBytes, hardLimitBytes: c.outboundHardLimitBytes, maxCount: c.outboundMaxQueuedMessages)
        LiveObjects.created(.webSocketTransport)
    }

    deinit { LiveObjects.released(.webSocketTransport) }

    /// The session of a socket that opened one itself (tests, admin).
    var session: ClientSession? { link?.local }

    // MARK: Lifecycle

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
        let pipeline = context.pipeline.syncOperations
        let encoder = (try? pipeline.context(handlerType: WebSocketFrameCodec.self)) ?? (try? pipeline.context(handlerType: WebSocketFrameEncoder.self))
        self.readyFrames = encoder.map(ReadyFramePath.init)
        self.codec = try? pipeline.handler(type: WebSocketFrameCodec.self)
        self.writes.writable = context.channel.isWritable
        self.partition = relay.partition(for: context.eventLoop)
        switch start {
        case .upgrade(let polling)?:
            link = SessionLink.probe(polling, transport: self, transportLoop: context.eventLoop)
        case .session(let handshake)?:
            let session = ClientSession(relay: relay, handshake: handshake.info, transport: .websocket, eventLoop: context.eventLoop)
            link = .local(session, transport: ObjectIdentifier(self))
            session.start(on: self)
        case nil:
            break
        }
        start = nil
    }

    func channelInactive(context: ChannelHandlerContext) {
        teardown()
        context.fireChannelInactive()
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        teardown()
        self.context = nil
    }

    private func teardown() {
        guard ending != .tornDown else { return }
        ending = .tornDown
        readyFrames = nil
        codec = nil
        if outbound.count > 0 { relay.metrics.delivery.dropped.increment(by: Int64(outbound.count)) }
        outbound.removeAll()
        writes.pendingPong = nil
        link?.transportClosed()
        link = nil
    }

    // MARK: Inbound frames

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let frame = unwrapInboundIn(data)
        guard ending == .open else { return }
        // Messages are held to the session's limit in force (`apply`).
        let output = inbound.read(frame, allocator: context.channel.allocator) { limit in
            WebSocketMessageReader(maxMessageBytes: limit, inflater: deflate != nil ? partition?.inflater : nil, messagesAsBytes: true)
        }
        switch output {
        case .none:
            // A fragment that completes no message still spends the budget.
            link?.receiveFrame(size: frame.length)
        case .pong:
            link?.receiveFrame(size: 0)
        case .bytes(let opcode, let bytes):
            if opcode == .text { link?.receive(bytes[...]) } else { link?.receiveBinary(bytes) }
        case .message(let opcode, let buffer):
            if opcode == .text {
                link?.receive(Array(buffer.readableBytesView)[...])
            } else {
                link?.receiveBinary(Array(buffer.readableBytesView))
            }
        case .ping(let data):
            answerPing(data, context: context)
            link?.receiveFrame(size: data.readableBytes)
        case .peerClosed(let code):
            fail(code: code, reason: "")
        case .fail(let code, let reason):
            fail(code: code, reason: reason)
        }
    }

    /// A transport-level end (a broken frame, the peer's close): the session decides and closes.
    private func fail(code: UInt16, reason: String) {
        if let link { link.close(code: code, reason: reason) } else { close(code: code, reason: reason) }
    }

    /// Answers a WebSocket ping at once when the socket drains, else remembers only the latest.
    private func answerPing(_ data: ByteBuffer, context: ChannelHandlerContext) {
        if outbound.isEmpty && writes.pendingPong == nil && context.channel.isWritable {
            context.write(wrapOutboundOut(WebSocketFrame(fin: true, opcode: .pong, data: data)), promise: nil)
            writes.needsFlush = true
            flush()
        } else {
            writes.pendingPong = data
        }
    }

    /// The session's limits in force changed: the reader takes the new message size, the frame
    /// codec the new frame size (checked at each frame's header, before its payload is buffered).
    func apply(_ limits: LimitsInForce) {
        inbound.apply(limits)
        codec?.frameLimit = limits.maxMessageBytes
    }

    func errorCaught(context: ChannelHandlerContext, error: Error) {
        if let wsError = error as? NIOWebSocketError {
            switch wsError {
            case .invalidFrameLength: fail(code: CloseCode.messageTooBig, reason: "frame too large")
            default: fail(code: CloseCode.protocolError, reason: "protocol error")
            }
        } else if error is WebSocketFrameCodec.InvalidText {
            fail(code: CloseCode.invalidPayloadData, reason: "invalid UTF-8")
        } else {
            context.close(promise: nil)
        }
    }

    // MARK: Outbound

    func send(_ message: OutboundMessage) {
        guard ending == .open else { return }
        assert(LockAudit.noneHeld(), "a lock is held across a socket write")
        if writes.writable && outbound.isEmpty {
            // The fan-out's path, before the transport's own context is even read: in a room of
            // thousands every object a delivery touches is a cache miss.
            if writeReadyFrame(message) { return }
            if let context { writeOwnFrame(message, context: context) }
            return
        }
        guard context != nil else { return }
        switch outbound.enqueue(message, bytes: message.byteCount, key: message.coalescingKey) {
        case .queued: break
        case .replaced: relay.metrics.delivery.coalesced.increment()
        case .overflow:
            relay.metrics.delivery.slowConsumerCloses.increment()
            fail(code: CloseCode.slowConsumer, reason: "slow consumer")
        }
    }

    /// Writes a message's frames: its text frame, then a binary packet's attachments, each one
    /// binary frame, with nothing in between.
    private func write(_ message: OutboundMessage, context: ChannelHandlerContext) {
        assert(LockAudit.noneHeld(), "a lock is held across a socket write")
        if writeReadyFrame(message) { return }
        writeOwnFrame(message, context: context)
    }

    /// Writes a message that has no ready-made frame for this socket (its own packets, a binary
    /// event, a deflate window of its own) through NIO's frame encoder.
    private func writeOwnFrame(_ message: OutboundMessage, context: ChannelHandlerContext) {
        context.write(wrapOutboundOut(frame(for: message, allocator: context.channel.allocator)), promise: nil)
        for attachment in message.attachments {
            context.write(wrapOutboundOut(WebSocketFrame(fin: true, opcode: .binary, data: attachment)), promise: nil)
        }
        writes.needsFlush = true
    }

    /// Writes the fan-out's ready-made frame from the encoder's context; `false` when this
    /// socket needs a frame of its own.
    private func writeReadyFrame(_ message: OutboundMessage) -> Bool {
        guard let readyFrames, let frame = preparedFrame(for: message) else { return false }
        readyFrames.context.write(NIOAny(frame), promise: nil)
        writes.needsFlush = true
        return true
    }

    /// The fan-out's ready-made frame for this socket: the compressed one when this client
    /// negotiated permessage-deflate with a full window and the message is over the threshold,
    /// the plain one when it gets the message uncompressed; `nil` when it needs its own.
    private func preparedFrame(for message: OutboundMessage) -> ByteBuffer? {
        guard let frames = message.frames else { return nil }
        guard let deflate, message.bytes.readableBytes >= configuration.engine.deflateThresholdBytes else { return frames.plain }
        return deflate.serverMaxWindowBits == 15 ? frames.compressed : nil
    }

    /// The frame for a message: compressed (RSV1) when this client negotiated permessage-deflate
    /// and the message is over the threshold, reusing the fan-out's shared compressed bytes when
    /// the client accepts a full window.
    private func frame(for message: OutboundMessage, allocator: ByteBufferAllocator) -> WebSocketFrame {
        if let deflate, message.bytes.readableBytes >= configuration.engine.deflateThresholdBytes, let partition {
            let compressed: ByteBuffer
            if deflate.serverMaxWindowBits == 15, let shared = message.compressed {
                compressed = shared
            } else {
                compressed = partition.deflater(windowBits: deflate.serverMaxWindowBits).compress(message.bytes, allocator: allocator)
            }
            return WebSocketFrame(fin: true, rsv1: true, opcode: .text, data: compressed)
        }
        return WebSocketFrame(fin: true, opcode: .text, data: message.bytes)
    }

    func prefetchChannel() {
        readyFrames?.prefetch()
    }

    /// What a peer may still send once the relay's close frame is out: its own close frame and
    /// what was in flight.
    static let discardAfterClose = 64 * 1024

    func flush() {
        assert(LockAudit.noneHeld(), "a lock is held across a socket flush")
        guard writes.needsFlush else { return }
        if let readyFrames {
            writes.needsFlush = false
            readyFrames.context.flush()
        } else if let context {
            writes.needsFlush = false
            context.flush()
        }
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        // Stop reading from a peer that does not read what we write: whatever it sends would
        // only make more replies to buffer. Reading resumes once the writes drain.
        let writable = context.channel.isWritable
        self.writes.writable = writable
        if ending == .open { try? context.channel.syncOptions?.setOption(ChannelOptions.autoRead, value: writable) }
        drainOutbound()
        context.fireChannelWritabilityChanged()
    }

    private func drainOutbound() {
        guard let context else { return }
        if let pong = writes.pendingPong, writes.writable {
            writes.pendingPong = nil
            context.write(wrapOutboundOut(WebSocketFrame(fin: true, opcode: .pong, data: pong)), promise: nil)
            writes.needsFlush = true
        }
        while writes.writable, let message = outbound.dequeue() {
            write(message, context: context)
        }
        flush()
    }

    /// Sends a close frame with `code`, then closes the channel.
    func close(code: UInt16, reason: String) {
        guard ending == .open, let context else { return }
        ending = .closing
        flush()
        var data = context.channel.allocator.buffer(capacity: 2 + reason.utf8.count)
        data.writeInteger(code)
        data.writeString(String(reason.prefix(120)))
        let channel = context.channel
        // Keep reading (and discarding) until the peer goes: closing with unread input would
        // send a TCP reset, and the peer would lose the close frame and its code. Bounded: a
        // peer that keeps sending is cut off (the codec drops the bytes undecoded).
        codec?.discardInput(allowance: Self.discardAfterClose)
        try? channel.syncOptions?.setOption(ChannelOptions.autoRead, value: true)
        // A stalled reader may never take the close frame, nor a peer answer it: do not wait
        // for either for long.
        let deadline = context.eventLoop.scheduleTask(in: .seconds(2)) { channel.close(promise: nil) }
        let me = NIOLoopBound(self, eventLoop: context.eventLoop)
        context.writeAndFlush(wrapOutboundOut(WebSocketFrame(fin: true, opcode: .connectionClose, data: data))).whenComplete { result in
            guard case .success = result else {
                deadline.cancel()
                channel.close(promise: nil)
                return
            }
            // No FIN yet: a client that saw FIN right behind the close frame may report the
            // connection gone before the frames ahead of it (socket.io-client-swift's Starscream
            // did, losing `auth:expired`). The peer answers with its close frame and the relay
            // closes then, as RFC 6455 §7.1.1 has it; one whose close frame came first is closed
            // now.
            me.value.closeFrameWritten(channel: channel, deadline: deadline)
        }
    }

    private func closeFrameWritten(channel: any Channel, deadline: Scheduled<Void>) {
        guard ending == .closing else { return }
        ending = .closeSent
        if codec?.peerHasClosed ?? true {
            deadline.cancel()
            channel.close(promise: nil)
        }
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        guard event is WebSocketFrameCodec.PeerClosed else { return context.fireUserInboundEventTriggered(event) }
        // The closing handshake is complete once the relay's own close frame is out.
        if ending == .closeSent { context.close(promise: nil) }
    }
}

extension WebSocketTransport {
    /// What a socket starts once it is in the pipeline.
    private enum Start {
        /// A session of its own, from the upgrade request's facts.
        case session(HandshakeBox)
        /// The upgrade of the polling session its URL named (`sid`).
        case upgrade(PollingRegistry.Handle)
    }
}

/// The upgrade request's facts, held by a socket's transport until its session is made.
/// Boxed: 72 bytes inline would stay in every socket's transport for its whole life.
private final class HandshakeBox {
    let info: HandshakeInfo
    init(info: HandshakeInfo) { self.info = info }
}
