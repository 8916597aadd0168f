import NIOCore
import RelayCore

/// How a WebSocket reaches its session: directly when both live on one event loop (every
/// socket that opened its own session), or by hopping to the session's loop (a socket that
/// upgrades a long-polling session accepted on another loop).
enum SessionLink {
    case local(ClientSession, transport: ObjectIdentifier)
    case remote(PollingRegistry.Handle, transport: ObjectIdentifier)

    /// The session, when it lives on the caller's loop.
    var local: ClientSession? {
        if case .local(let session, _) = self { return session }
        return nil
    }

    /// Links an upgrade probe to its polling session; called on the WebSocket's loop.
    static func probe(_ handle: PollingRegistry.Handle, transport: WebSocketTransport, transportLoop: any EventLoop) -> SessionLink {
        if handle.loop === transportLoop {
            let session = handle.session.value
            session.probeOpened(transport)
            return .local(session, transport: ObjectIdentifier(transport))
        }
        let proxy = CrossLoopTransport(target: NIOLoopBound(transport, eventLoop: transportLoop), loop: transportLoop)
        let id = ObjectIdentifier(proxy)
        let handOff = HandOff(proxy)
        handle.loop.execute { handle.session.value.probeOpened(handOff.value) }
        return .remote(handle, transport: id)
    }

    /// One whole Engine.IO text packet from the WebSocket.
    func receive(_ bytes: ArraySlice<UInt8>) {
        switch self {
        case .local(let session, _):
            session.receive(bytes, from: .websocket)
        case .remote(let handle, _):
            let copy = Array(bytes)
            handle.loop.execute { handle.session.value.receive(copy[...], from: .websocket) }
        }
    }

    /// One binary message from the WebSocket: an attachment.
    func receiveBinary(_ bytes: [UInt8]) {
        switch self {
        case .local(let session, _):
            session.receiveBinary(bytes, from: .websocket)
        case .remote(let handle, _):
            handle.loop.execute { handle.session.value.receiveBinary(bytes, from: .websocket) }
        }
    }

    /// A WebSocket frame of `size` bytes that is not a whole message (a control frame the
    /// transport answered, a fragment): it spends the session's inbound budget like any packet.
    func receiveFrame(size: Int) {
        switch self {
        case .local(let session, _):
            session.receiveFrame(size: size)
        case .remote(let handle, _):
            handle.loop.execute { handle.session.value.receiveFrame(size: size) }
        }
    }

    /// The WebSocket broke a rule or its peer closed it.
    func close(code: UInt16, reason: String) {
        switch self {
        case .local(let session, let id):
            session.transportFailed(id, code: code, reason: reason)
        case .remote(let handle, let id):
            handle.loop.execute { handle.session.value.transportFailed(id, code: code, reason: reason) }
        }
    }

    /// The WebSocket is gone.
    func transportClosed() {
        switch self {
        case .local(let session, let id):
            session.transportClosed(id)
        case .remote(let handle, let id):
            handle.loop.execute { handle.session.value.transportClosed(id) }
        }
    }
}

/// A WebSocket on another loop, as its session (on its home loop) writes to it: packets are
/// batched and handed over in one hop per flush, in order.
final class CrossLoopTransport: SessionTransport {
    private let target: NIOLoopBound<WebSocketTransport>
    private let loop: any EventLoop
    private var batch: [OutboundMessage] = []

    init(target: NIOLoopBound<WebSocketTransport>, loop: any EventLoop) {
        self.target = target
        self.loop = loop
    }

    func send(_ message: OutboundMessage) { batch.append(message) }

    func flush() {
        guard !batch.isEmpty else { return }
        let messages = batch
        batch.removeAll(keepingCapacity: true)
        let target = self.target
        loop.execute {
            let transport = target.value
            for message in messages { transport.send(message) }
            transport.flush()
        }
    }

    func close(code: UInt16, reason: String) {
        flush()
        let target = self.target
        loop.execute { target.value.close(code: code, reason: reason) }
    }

    func apply(_ limits: LimitsInForce) {
        let target = self.target
        loop.execute { target.value.apply(limits) }
    }
}

/// Hands a value created on one event loop to another, once: from then on only the receiving
/// loop touches it. (`@unchecked Sendable`: nothing else guards the value; the single hand-off
/// through `EventLoop.execute` orders the accesses.)
struct HandOff<Value>: @unchecked Sendable {
    let value: Value
    init(_ value: Value) { self.value = value }
}
