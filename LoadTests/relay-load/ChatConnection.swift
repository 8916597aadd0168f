import NIOCore
import NIOWebSocket

/// One socket of the `chat` scenario: Socket.IO over WebSocket. It connects with its token and
/// its user's rooms in the CONNECT auth (PROTOCOL §12 "Rooms in CONNECT"), answers pings, parses
/// what arrives just enough to hand it to its `ChatLoop`, and times its acks.
///
/// Accepts what Relay sends and what stock Socket.IO servers send (python-socketio puts a space
/// after each `:` and `,`; Relay and Node do not).
final class ChatConnection: ChannelInboundHandler {
    typealias InboundIn = WebSocketFrame
    typealias OutboundOut = WebSocketFrame

    enum AckKind {
        case message
        case receipt(items: Int)
    }

    unowned let app: ChatLoop
    let device: ChatDevice
    let ready: EventLoopPromise<Void>
    /// TCP connect started (monotonic ns).
    let startedAt: UInt64
    private(set) var context: ChannelHandlerContext?
    private(set) var isConnected = false
    /// Set before the generator closes it itself (churn, the end).
    var closingByUs = false
    private var nextAckID: Int64 = 0
    /// Ack id → (sent at, kind, whether it was sent inside the window).
    private var pendingAcks: [Int64: (UInt64, AckKind, Bool)] = [:]

    init(app: ChatLoop, device: ChatDevice, ready: EventLoopPromise<Void>, startedAt: UInt64) {
        self.app = app
        self.device = device
        self.ready = ready
        self.startedAt = startedAt
    }

    /// Acks asked inside the window and not answered (yet).
    var unansweredInWindow: Int { pendingAcks.values.filter { $0.2 }.count }

    func handlerAdded(context: ChannelHandlerContext) { self.context = context }

    func handlerRemoved(context: ChannelHandlerContext) {
        self.context = nil
        if !isConnected { ready.fail(LoadError.closedBeforeReady) }
    }

    func channelInactive(context: ChannelHandlerContext) {
        app.closed(self)
        context.fireChannelInactive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let frame = unwrapInboundIn(data)
        guard frame.opcode == .text else {
            if let code = SocketIOText.control(frame, context: context), !closingByUs { app.stats.closes[code, default: 0] += 1 }
            return
        }
        handleText(frame.data)
    }

    private func handleText(_ buffer: ByteBuffer) {
        let now = monotonicNanos()
        buffer.withUnsafeReadableBytes { raw in
            let b = raw.bindMemory(to: UInt8.self)
            switch SocketIOText.packet(b) {
            case .ping:
                sendText("3")
            case .open:
                sendText("40{\"token\":\"\(device.user.token)\",\"rooms\":\(device.user.roomsJSON)}")
            case .event:
                app.stats.events += 1
                handleEvent(b, now: now)
            case .ack(let id):
                handleAck(b, id: id, now: now)
            case .connected:
                // Relay lists rooms it refused; a stock server refuses the whole CONNECT.
                if SocketIOText.contains(b, "\"refused\"") { app.stats.errors["rooms_refused", default: 0] += 1 }
                isConnected = true
                app.connected(self, now: now)
                ready.succeed(())
            case .connectError:
                app.stats.errors["connect_error", default: 0] += 1
                ready.fail(LoadError.connectRefused(String(decoding: b, as: UTF8.self)))
            case .other:
                break
            }
        }
    }

    private func handleEvent(_ b: UnsafeBufferPointer<UInt8>, now: UInt64) {
        // 42["name",{…}]
        guard b.count > 5 else { return }
        if SocketIOText.hasPrefix(b, from: 4, "chat:message\"") {
            app.chatMessage(
                to: device, sentAt: SocketIOText.int(b, "\"t\":") ?? 0, room: SocketIOText.int(b, "\"room\":", after: "chat-") ?? -1,
                from: SocketIOText.int(b, "\"from\":", after: "user-") ?? -1, now: now, messageID: { SocketIOText.string(b, "\"messageId\":") })
        } else if SocketIOText.hasPrefix(b, from: 4, "typing:") {
            app.arrived(now: now) { $0.typingDeliveries += 1 }
        } else if SocketIOText.hasPrefix(b, from: 4, "message:delivered\"") || SocketIOText.hasPrefix(b, from: 4, "message:read\"") {
            app.arrived(now: now) { $0.receiptDeliveries += 1 }
        } else if SocketIOText.hasPrefix(b, from: 4, "presence:") {
            app.arrived(now: now) { $0.presenceDeliveries += 1 }
        } else if SocketIOText.hasPrefix(b, from: 4, "error\"") {
            app.stats.errors["error_event[\(SocketIOText.string(b, "\"code\":") ?? "?")]", default: 0] += 1
        } else {
            app.arrived(now: now) { $0.otherDeliveries += 1 }
        }
    }

    private func handleAck(_ b: UnsafeBufferPointer<UInt8>, id: Int64, now: UInt64) {
        guard let (sentAt, kind, inWindow) = pendingAcks.removeValue(forKey: id) else { return }
        guard SocketIOText.isOK(b) else {
            app.stats.ackErrors[SocketIOText.string(b, "\"code\":") ?? "unknown", default: 0] += 1
            return
        }
        guard inWindow else { return }
        let micros = (now &- sentAt) / 1000
        switch kind {
        case .message:
            app.stats.messageAcks += 1
            app.stats.messageAck.record(micros)
        case .receipt(let items):
            app.stats.receiptBatchesAcked += 1
            app.stats.receiptItemsAcked += items
            app.stats.receiptAck.record(micros)
        }
    }

    // MARK: Sending

    func sendText(_ text: String) {
        guard let context else { return }
        var buffer = context.channel.allocator.buffer(capacity: text.utf8.count)
        buffer.writeString(text)
        context.writeAndFlush(wrapOutboundOut(WebSocketFrame(fin: true, opcode: .text, maskKey: .random(), data: buffer)), promise: nil)
    }

    /// Emits `42["event",payload]`, or `42<id>[…]` with an ack timed as `ack`.
    func emit(_ event: String, _ payloadJSON: String, ack: AckKind?, inWindow: Bool) {
        guard let ack else {
            sendText("42[\"\(event)\",\(payloadJSON)]")
            return
        }
        nextAckID += 1
        pendingAcks[nextAckID] = (monotonicNanos(), ack, inWindow)
        sendText("42\(nextAckID)[\"\(event)\",\(payloadJSON)]")
    }

    func close() {
        closingByUs = true
        context?.close(promise: nil)
    }
}
