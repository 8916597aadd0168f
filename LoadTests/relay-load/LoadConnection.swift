import NIOCore
import NIOHTTP1
import NIOPosix
import NIOWebSocket

/// How the generator talks to the server under test.
enum WireProtocol: String, Sendable {
    /// Engine.IO v4 / Socket.IO v5, as the relay and python-socketio servers speak.
    case socketio
    /// Plain JSON text frames: `{"join":room}` to join, `{"room","t",…}` to broadcast.
    case raw
}

/// One generator socket: speaks Socket.IO (or raw JSON) over WebSocket, answers pings, and
/// records deliveries and ack latencies into its loop's `LoopStats`.
final class LoadConnection: ChannelInboundHandler {
    typealias InboundIn = WebSocketFrame
    typealias OutboundOut = WebSocketFrame

    enum AckKind { case join, receipt, other }

    let wire: WireProtocol
    let token: String
    let room: String?
    let stats: LoopStats
    /// Succeeds when connected (and the room joined, if any).
    let ready: EventLoopPromise<Void>
    /// Whether this connection records the room's typing arrivals.
    var observesTyping = false
    /// Typing state for the typing storm.
    var typingOn = false
    /// Called after each successful receipt ack (the receipts scenario sends the next one).
    var onAck: (() -> Void)?
    private(set) var context: ChannelHandlerContext?
    private var nextAckID: Int64 = 0
    private var pendingAcks: [Int64: (UInt64, AckKind)] = [:]
    private var isReady = false
    /// Set by `stall`: its deliveries are not the others' latency.
    private var stalled = false

    init(wire: WireProtocol, token: String, room: String?, stats: LoopStats, ready: EventLoopPromise<Void>) {
        self.wire = wire
        self.token = token
        self.room = room
        self.stats = stats
        self.ready = ready
    }

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
        if wire == .raw {
            if let room { sendText("{\"join\":\"\(room)\"}") }
            markReady()
        }
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        self.context = nil
        if !isReady { ready.fail(LoadError.closedBeforeReady) }
    }

    private func markReady() {
        guard !isReady else { return }
        isReady = true
        ready.succeed(())
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let frame = unwrapInboundIn(data)
        guard frame.opcode == .text else {
            if let code = SocketIOText.control(frame, context: context) { stats.closes[code, default: 0] += 1 }
            return
        }
        handleText(frame.data)
    }

    private func handleText(_ buffer: ByteBuffer) {
        let now = monotonicNanos()
        buffer.withUnsafeReadableBytes { raw in
            let b = raw.bindMemory(to: UInt8.self)
            guard !b.isEmpty else { return }
            if wire == .raw {
                stats.events += 1
                if let t = SocketIOText.int(b, "\"t\":") { record(delivery: now, sentAt: t) }
                return
            }
            switch SocketIOText.packet(b) {
            case .ping:
                sendText("3")
            case .open:
                sendText("40{\"token\":\"\(token)\"}")
            case .connected:
                if let room { emit("room:join", "{\"room\":\"\(room)\"}", ack: .join) } else { markReady() }
            case .event:
                stats.events += 1
                handleEvent(b, now: now)
            case .ack(let id):
                handleAck(b, id: id, now: now)
            case .connectError:
                stats.errors["connect_error", default: 0] += 1
                ready.fail(LoadError.connectRefused(String(decoding: b, as: UTF8.self)))
            case .other:
                break
            }
        }
    }

    private func handleEvent(_ b: UnsafeBufferPointer<UInt8>, now: UInt64) {
        // 42["name",{...}]
        guard b.count > 5 else { return }
        if SocketIOText.hasPrefix(b, from: 4, "typing:") {
            stats.typingEvents += 1
            if observesTyping, let room { stats.typingArrivals[room, default: []].append(now) }
            return
        }
        // Other members joining (the setup's own traffic): not a delivery of the scenario.
        if SocketIOText.hasPrefix(b, from: 4, "presence:") {
            stats.presenceEvents += 1
            return
        }
        if SocketIOText.hasPrefix(b, from: 4, "error\"") {
            stats.errors["error_event", default: 0] += 1
            return
        }
        if let t = SocketIOText.int(b, "\"t\":") {
            record(delivery: now, sentAt: t)
        } else {
            stats.deliveries += 1
        }
    }

    private func handleAck(_ b: UnsafeBufferPointer<UInt8>, id: Int64, now: UInt64) {
        guard let (sentAt, kind) = pendingAcks.removeValue(forKey: id) else { return }
        let ok = SocketIOText.isOK(b)
        switch kind {
        case .join:
            if ok { markReady() } else { ready.fail(LoadError.joinRefused(String(decoding: b, as: UTF8.self))) }
        case .receipt, .other:
            if ok {
                stats.acks += 1
                stats.ackLatency.record((now &- sentAt) / 1000)
                if kind == .receipt { onAck?() }
            } else {
                let code = SocketIOText.string(b, "\"code\":") ?? "unknown"
                stats.ackErrors[code, default: 0] += 1
            }
        }
    }

    private func record(delivery now: UInt64, sentAt: Int64) {
        if stalled {
            stats.stalledDeliveries += 1
            return
        }
        stats.deliveries += 1
        if sentAt > 0, now > UInt64(sentAt) { stats.deliveryLatency.record((now - UInt64(sentAt)) / 1000) }
    }

    // MARK: Sending

    func sendText(_ text: String, flushNow: Bool = true) {
        guard let context else { return }
        var buffer = context.channel.allocator.buffer(capacity: text.utf8.count)
        buffer.writeString(text)
        context.write(wrapOutboundOut(WebSocketFrame(fin: true, opcode: .text, maskKey: .random(), data: buffer)), promise: nil)
        if flushNow { context.flush() } else { flushSoon() }
    }

    private var flushScheduled = false

    /// One flush after the tasks already queued on this loop (acks that arrive together send
    /// their follow-ups in one write), so the generator spends less of the shared CPU.
    private func flushSoon() {
        guard !flushScheduled, let context else { return }
        flushScheduled = true
        context.eventLoop.assumeIsolated().execute { [weak self] in
            guard let self else { return }
            self.flushScheduled = false
            self.context?.flush()
        }
    }

    /// Acks of `kind` still awaited: sent, and neither acked nor refused.
    func awaitedAcks(of kind: AckKind) -> Int {
        pendingAcks.values.reduce(0) { $0 + ($1.1 == kind ? 1 : 0) }
    }

    /// Emits `42[<id>]["event",payload]`.
    func emit(_ event: String, _ payloadJSON: String, ack: AckKind? = nil, flushNow: Bool = true) {
        if let ack {
            nextAckID += 1
            pendingAcks[nextAckID] = (monotonicNanos(), ack)
            sendText("42\(nextAckID)[\"\(event)\",\(payloadJSON)]", flushNow: flushNow)
        } else {
            sendText("42[\"\(event)\",\(payloadJSON)]")
        }
        stats.sent += 1
    }

    /// Sends one benchmark message stamped with the send time.
    func sendBench(event: String) {
        guard let room else { return }
        let t = monotonicNanos()
        if wire == .raw {
            sendText("{\"room\":\"\(room)\",\"t\":\(t)}")
            stats.sent += 1
        } else {
            emit(event, "{\"room\":\"\(room)\",\"t\":\(t)}")
        }
    }

    /// Stops reading from the socket (a stalled phone). What it still reads later (buffered
    /// before the stall, or when the server closes it) is counted apart.
    func stall() {
        stalled = true
        context?.channel.setOption(ChannelOptions.autoRead, value: false).whenComplete { _ in }
    }
}

enum LoadError: Error, CustomStringConvertible {
    case closedBeforeReady
    case connectRefused(String)
    case joinRefused(String)
    case upgradeFailed
    case timeout(String)

    var description: String {
        switch self {
        case .closedBeforeReady: return "closed before ready"
        case .connectRefused(let s): return "CONNECT refused: \(s.prefix(200))"
        case .joinRefused(let s): return "room:join refused: \(s.prefix(200))"
        case .upgradeFailed: return "WebSocket upgrade failed"
        case .timeout(let s): return "timeout: \(s)"
        }
    }
}
