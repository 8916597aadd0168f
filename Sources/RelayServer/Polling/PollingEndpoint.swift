import Atomics
import NIOCore
import NIOHTTP1
import RelayCore

/// Engine.IO v4 HTTP long-polling: `GET`/`POST /socket.io/?EIO=4&transport=polling[&sid=…]`.
///
/// The handshake (`GET` without `sid`) opens a `ClientSession` on the request's loop with a
/// `PollingTransport` and answers the open packet; later requests hop to the session's loop: a
/// `GET` takes (or waits for) what the session sent, a `POST` carries packets joined by `\x1e`.
/// Browsers get CORS answers for the origins the Origin policy admits.
struct PollingEndpoint {
    let relay: RelayContext

    /// Engine.IO's own error answers (HTTP 400 with `{"code","message"}`).
    enum EngineError: Int {
        case transportUnknown = 0
        case sessionUnknown = 1
        case badHandshakeMethod = 2
        case badRequest = 3
        case forbidden = 4
        case unsupportedProtocolVersion = 5

        var message: String {
            switch self {
            case .transportUnknown: return "Transport unknown"
            case .sessionUnknown: return "Session ID unknown"
            case .badHandshakeMethod: return "Bad handshake method"
            case .badRequest: return "Bad request"
            case .forbidden: return "Forbidden"
            case .unsupportedProtocolVersion: return "Unsupported protocol version"
            }
        }
    }

    static func engineError(_ error: EngineError, status: HTTPResponseStatus = .badRequest) -> HTTPResponse {
        .json(status, .object([("code", .int(Int64(error.rawValue))), ("message", .string(error.message))]))
    }

    /// How much of a polling `POST` is read, from its head: one `POST` at a time per session
    /// (Engine.IO clients never overlap them; a second one is refused before its body is read),
    /// the small pre-authentication limit until the session's CONNECT succeeded, then
    /// `maxPayload`. A logged-in user's bodies in flight are thus bounded by their sessions,
    /// which count against the same per-user connection limit as WebSockets.
    static func bodyAdmission(for query: QueryString, relay: RelayContext) -> BodyPolicy {
        let c = relay.configuration
        guard let sid = query["sid"], let handle = relay.pollingSessions.lookup(sid) else {
            return .read(limit: c.engine.maxConnectPayload, release: nil)
        }
        let slot = handle.postInFlight
        guard slot.compareExchange(expected: false, desired: true, ordering: .acquiringAndReleasing).exchanged else {
            return .refuse(engineError(.badRequest))
        }
        let limit = handle.bodyLimit.load(ordering: .relaxed)
        return .read(limit: limit, release: { slot.store(false, ordering: .releasing) })
    }

    func handle(_ request: HTTPRequest, query: QueryString, on loop: any EventLoop) -> EventLoopFuture<HTTPResponse> {
        let origin = request.head.headers.first(name: "origin")
        if let origin, !relay.configuration.listener.originPolicy.allows(origin: origin, host: request.head.headers.first(name: "host")) {
            return loop.makeSucceededFuture(.error(.forbidden, code: "origin_not_allowed", message: "origin \(origin) is not allowed"))
        }
        let answer = respond(request, query: query, on: loop)
        guard let origin else { return answer }
        // CORS for an admitted browser origin; credentials only for a listed one.
        let headers = relay.configuration.listener.originPolicy.corsHeaders(origin: origin)
        return answer.map { response in
            var r = response
            r.extraHeaders += headers
            return r
        }
    }

    private func respond(_ request: HTTPRequest, query: QueryString, on loop: any EventLoop) -> EventLoopFuture<HTTPResponse> {
        switch request.method {
        case .OPTIONS:
            var r = HTTPResponse(status: .noContent, contentType: "text/plain", body: [])
            r.extraHeaders += [("access-control-allow-methods", "GET, POST, OPTIONS"), ("access-control-allow-headers", "content-type, authorization"), ("access-control-max-age", "600")]
            return loop.makeSucceededFuture(r)
        case .GET, .POST:
            break
        default:
            return loop.makeSucceededFuture(Self.engineError(.badHandshakeMethod))
        }
        guard let sid = query["sid"] else {
            guard request.method == .GET else { return loop.makeSucceededFuture(Self.engineError(.badHandshakeMethod)) }
            return handshake(request, query: query, on: loop)
        }
        guard let handle = relay.pollingSessions.lookup(sid) else { return loop.makeSucceededFuture(Self.engineError(.sessionUnknown)) }
        let promise = loop.makePromise(of: HTTPResponse.self)
        if request.method == .GET {
            handle.loop.execute { Self.poll(handle, promise) }
        } else {
            let body = request.body
            handle.loop.execute { promise.succeed(Self.push(body, to: handle)) }
        }
        return promise.futureResult
    }

    /// A `GET`, on the session's loop. Right after the upgrade, a client that was polling may
    /// still have one on its way: it gets a `noop` it ignores, not an error.
    private static func poll(_ handle: PollingRegistry.Handle, _ promise: EventLoopPromise<HTTPResponse>) {
        guard let transport = handle.transport.value as? PollingTransport else { return promise.succeed(engineError(.sessionUnknown)) }
        guard transport.upgraded else { return transport.poll(promise) }
        let socket = handle.session.value
        if transport.polledDuringUpgrade, socket.acceptsPolling {
            promise.succeed(PollingTransport.body([UInt8(ascii: "6")]))
        } else {
            promise.succeed(engineError(.sessionUnknown))
        }
    }

    /// A `POST`, on the session's loop: its packets in order. One the client sent before its
    /// upgrade's `5` (socket.io-client-swift does not wait for the answer to its CONNECT `POST`)
    /// is still the session's for a moment after the upgrade. A body that broke the protocol or
    /// a limit is answered 400 (the session is gone).
    private static func push(_ body: [UInt8], to handle: PollingRegistry.Handle) -> HTTPResponse {
        let socket = handle.session.value
        guard let transport = handle.transport.value as? PollingTransport else { return engineError(.sessionUnknown) }
        if transport.closed {
            guard transport.upgraded, socket.acceptsPolling else {
                return engineError(.sessionUnknown)
            }
        }
        for packet in PollingPayload(body[...]) {
            if socket.isClosing { break }
            socket.receive(packet, from: .polling)
        }
        if socket.isClosing, let code = socket.closeCode, CloseCode.isRequestFault(code) { return engineError(.badRequest) }
        return .text(.ok, "ok", contentType: "text/html")
    }

    /// `GET` without `sid`: a new session on this loop, answered with its open packet.
    private func handshake(_ request: HTTPRequest, query: QueryString, on loop: any EventLoop) -> EventLoopFuture<HTTPResponse> {
        // A polling session counts against the connection limits like a socket.
        let admission = relay.admission
        let ip = request.remoteIP
        // Too many CONNECTs pending: refused before it costs anything (the client backs off).
        if admission.pending.refusesNewSession() { return loop.makeSucceededFuture(PendingConnects.busyResponse()) }
        guard admission.open(ip: ip) else {
            admission.close(ip: ip)
            return loop.makeSucceededFuture(.error(.serviceUnavailable, code: "too_many_connections", message: "connection limit reached"))
        }
        let info = HandshakeInfo(remoteIP: ip, queryToken: query["token"], bearerToken: BearerToken.from(request.head.headers))
        let session = ClientSession(relay: relay, handshake: info, transport: .polling, eventLoop: loop)
        let c = relay.configuration
        let transport = PollingTransport(
            eventLoop: loop, softLimitBytes: c.connections.outboundSoftLimitBytes, hardLimitBytes: c.connections.outboundHardLimitBytes,
            maxMessages: c.connections.outboundMaxQueuedMessages, holdMs: Int64(c.engine.pingIntervalMs + c.engine.pingTimeoutMs))
        let handle = PollingRegistry.Handle(
            session: NIOLoopBound(session, eventLoop: loop), transport: NIOLoopBound(transport as any SessionTransport, eventLoop: loop), loop: loop,
            bodyLimit: ManagedAtomic(session.limits.maxMessageBytes), postInFlight: ManagedAtomic(false))
        let sessions = relay.pollingSessions
        let engineSID = session.engineSID
        sessions.insert(engineSID, handle)
        var released = false
        let metrics = relay.metrics
        transport.observers.onViolation = { [weak session] code, reason in
            if code == CloseCode.slowConsumer { metrics.delivery.slowConsumerCloses.increment() }
            session?.close(code: code, reason: reason)
        }
        transport.observers.onDropped = { metrics.delivery.dropped.increment(by: Int64($0)) }
        transport.observers.onCoalesced = { metrics.delivery.coalesced.increment() }
        transport.observers.onClosed = { [weak session, weak transport] in
            // The polling slot is released when polling ends (closed, or upgraded).
            if !released {
                released = true
                admission.close(ip: ip)
            }
            if let session, let transport { session.transportClosed(ObjectIdentifier(transport)) }
        }
        // A session that ended while no GET was held may still owe the client what it buffered
        // and the close (a CONNECT refusal: without it a client sees a transport error and
        // retries with the same token forever), or a noop after its own close: its sid answers
        // one more GET, for a bounded time.
        session.onEnd = { [weak transport] in
            guard let transport, transport.owesAnswer else {
                sessions.remove(engineSID)
                transport?.discard()
                return
            }
            transport.observers.onCloseDelivered = { sessions.remove(engineSID) }
            loop.assumeIsolated().scheduleTask(in: .seconds(10)) { [weak transport] in
                sessions.remove(engineSID)
                transport?.discard()
            }
        }
        // Only the flag: the handle holds the session, so capturing it would keep every session
        // that never logs in alive for ever.
        let bodyLimit = handle.bodyLimit
        session.onLimits = { bodyLimit.store($0.maxMessageBytes, ordering: .relaxed) }
        session.start(on: transport)
        let promise = loop.makePromise(of: HTTPResponse.self)
        transport.poll(promise)
        return promise.futureResult
    }
}
