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
        switch frame.opcode {
        case .text:
            handleText(frame.data)
        case .connectionClose:
            var d = frame.data
            let code = d.readInteger(as: UInt16.self) ?? 1005
            if !closingByUs { app.stats.closes[code, default: 0] += 1 }
            context.close(promise: nil)
        case .ping:
            context.writeAndFlush(wrapOutboundOut(WebSocketFrame(fin: true, opcode: .pong, maskKey: .random(), data: frame.data)), promise: nil)
        default:
            break
        }
    }

    private func handleText(_ buffer: ByteBuffer) {
        let now = monotonicNanos()
        buffer.withUnsafeReadableBytes { raw in
            let b = raw.bindMemory(to: UInt8.self)
            guard let first = b.first else { return }
            switch first {
            case UInt8(ascii: "2"):
                sendText("3")
            case UInt8(ascii: "0"):
                sendText("40{\"token\":\"\(device.user.token)\",\"rooms\":\(device.user.roomsJSON)}")
            case UInt8(ascii: "4") where b.count >= 2:
                switch b[1] {
                case UInt8(ascii: "2"):
                    app.stats.events += 1
                    handleEvent(b, now: now)
                case UInt8(ascii: "3"):
                    handleAck(b, now: now)
                case UInt8(ascii: "0"):
                    // Relay lists rooms it refused; a stock server refuses the whole CONNECT.
                    if LoadConnection.contains(b, "\"refused\"") { app.stats.errors["rooms_refused", default: 0] += 1 }
                    isConnected = true
                    app.connected(self, now: now)
                    ready.succeed(())
                case UInt8(ascii: "4"):
                    app.stats.errors["connect_error", default: 0] += 1
                    ready.fail(LoadError.connectRefused(String(decoding: b, as: UTF8.self)))
                default:
                    break
                }
            default:
                break
            }
        }
    }

    private func handleEvent(_ b: UnsafeBufferPointer<UInt8>, now: UInt64) {
        // 42["name",{…}]
        guard b.count > 5 else { return }
        if LoadConnection.hasPrefix(b, from: 4, "chat:message\"") {
            app.chatMessage(
                to: device, sentAt: Self.int(b, "\"t\":") ?? 0, room: Self.int(b, "\"room\":", after: "chat-") ?? -1,
                from: Self.int(b, "\"from\":", after: "user-") ?? -1, now: now, messageID: { Self.string(b, "\"messageId\":") })
        } else if LoadConnection.hasPrefix(b, from: 4, "typing:") {
            app.arrived(now: now) { $0.typingDeliveries += 1 }
        } else if LoadConnection.hasPrefix(b, from: 4, "message:delivered\"") || LoadConnection.hasPrefix(b, from: 4, "message:read\"") {
            app.arrived(now: now) { $0.receiptDeliveries += 1 }
        } else if LoadConnection.hasPrefix(b, from: 4, "presence:") {
            app.arrived(now: now) { $0.presenceDeliveries += 1 }
        } else if LoadConnection.hasPrefix(b, from: 4, "error\"") {
            app.stats.errors["error_event[\(Self.string(b, "\"code\":") ?? "?")]", default: 0] += 1
        } else {
            app.arrived(now: now) { $0.otherDeliveries += 1 }
        }
    }

    private func handleAck(_ b: UnsafeBufferPointer<UInt8>, now: UInt64) {
        var i = 2
        var id: Int64 = 0
        while i < b.count, b[i] >= 48, b[i] <= 57 {
            id = id * 10 + Int64(b[i] - 48)
            i += 1
        }
        guard let (sentAt, kind, inWindow) = pendingAcks.removeValue(forKey: id) else { return }
        guard LoadConnection.contains(b, "\"ok\":true") || LoadConnection.contains(b, "\"ok\": true") else {
            app.stats.ackErrors[Self.string(b, "\"code\":") ?? "unknown", default: 0] += 1
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

    // MARK: Scanners (tolerant of a space after the colon)

    /// The integer after `key` (and after the literal `after`, inside a string: `"chat-12"`).
    static func int(_ b: UnsafeBufferPointer<UInt8>, _ key: StaticString, after prefix: StaticString = "") -> Int64? {
        guard var i = LoadConnection.find(b, key) else { return nil }
        while i < b.count, b[i] == UInt8(ascii: " ") { i += 1 }
        if prefix.utf8CodeUnitCount > 0 {
            guard i < b.count, b[i] == UInt8(ascii: "\""), LoadConnection.hasPrefix(b, from: i + 1, prefix) else { return nil }
            i += 1 + prefix.utf8CodeUnitCount
        }
        var v: Int64 = 0
        var digits = 0
        while i < b.count, b[i] >= 48, b[i] <= 57 {
            v = v &* 10 &+ Int64(b[i] - 48)
            i += 1
            digits += 1
        }
        return digits > 0 ? v : nil
    }

    /// The string after `key` (no escapes: the generator's own ids and codes have none).
    static func string(_ b: UnsafeBufferPointer<UInt8>, _ key: StaticString) -> String? {
        guard var i = LoadConnection.find(b, key) else { return nil }
        while i < b.count, b[i] == UInt8(ascii: " ") { i += 1 }
        guard i < b.count, b[i] == UInt8(ascii: "\"") else { return nil }
        i += 1
        var end = i
        while end < b.count, b[end] != UInt8(ascii: "\"") { end += 1 }
        return String(decoding: UnsafeBufferPointer(rebasing: b[i..<end]), as: UTF8.self)
    }
}
