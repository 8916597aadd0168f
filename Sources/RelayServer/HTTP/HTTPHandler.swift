import Logging
import NIOCore
import NIOHTTP1
import NIOWebSocket
import RelayBackends
import RelayCore
import RelayLocks

/// Serves every HTTP request that is not a WebSocket upgrade: the backend API, health, and
/// clear refusals for Engine.IO polling. Bodies are bounded; a slow or idle client is closed
/// after the handshake timeout.
final class HTTPHandler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    private let relay: RelayContext
    private let router: HTTPRouter
    /// The connection's client and admission (re-checked per request behind a trusted proxy).
    private let client: ConnectionAdmission
    private var head: HTTPRequestHead?
    private var body = RequestBody()
    /// Gives back what the request's body admission claimed (a polling session's POST slot).
    private var releaseBody: (@Sendable () -> Void)?
    private var idleTimeout: Scheduled<Void>?
    /// A complete request held back while the client is not reading our answers: the next
    /// answer is only produced once the previous ones drained, so a client that pipelines
    /// requests and never reads costs one response, not gigabytes.
    private var parked: (request: HTTPRequest, keepAlive: Bool)?

    /// Makes a WebSocket upgrade handler for the next request of a keep-alive connection.
    var makeUpgradeHandler: ((ChannelPipeline.SynchronousOperations) throws -> HTTPServerUpgradeHandler)?
    /// This handler gives the connection's admission back when it leaves the pipeline (the
    /// connection closed), unless an upgrade handed it on to the WebSocket (`handOverAdmission`).
    private var releasesAdmission = true

    init(relay: RelayContext, router: HTTPRouter, client: ConnectionAdmission) {
        self.relay = relay
        self.router = router
        self.client = client
    }

    func handlerAdded(context: ChannelHandlerContext) {
        armIdleTimeout(context: context)
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        finishBody()
        idleTimeout?.cancel()
        streamTask?.cancel()
        // The closure holds this handler (through the upgrader's completion): let both go once
        // the connection upgraded or closed, instead of for as long as the socket lives.
        makeUpgradeHandler = nil
        if releasesAdmission { client.release() }
    }

    /// The connection upgraded: its WebSocket gives the admission back when it closes.
    func handOverAdmission() {
        releasesAdmission = false
    }

    /// Closes a connection that does not finish a request in time (half-sent requests, idle
    /// keep-alive connections).
    private func armIdleTimeout(context: ChannelHandlerContext) {
        idleTimeout?.cancel()
        let channel = context.channel
        idleTimeout = context.eventLoop.scheduleTask(in: .milliseconds(Int64(relay.configuration.listener.handshakeTimeoutMs))) {
            channel.close(promise: nil)
        }
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let head):
            self.head = head
            finishBody()
            // Decided before a byte of the body is kept: who may send one, and how much.
            let policy = router.bodyPolicy(for: head)
            body = RequestBody(policy: policy)
            if case .read(_, let release) = policy { releaseBody = release }
        case .body(var chunk):
            body.append(&chunk)
        case .end:
            guard let head else { return }
            self.head = nil
            idleTimeout?.cancel()
            if body.tooLarge {
                finishBody()
                let response = HTTPResponse.error(.payloadTooLarge, code: "payload_too_large", message: "request body exceeds \(body.limit) bytes")
                body = RequestBody()
                write(response, keepAlive: false, context: context)
                return
            }
            if let refusal = body.refusal {
                body = RequestBody()
                write(refusal, keepAlive: false, context: context)
                return
            }
            let (remoteIP, admitted) = client.resolve(head)
            let droppedBody = body.dropped
            let request = HTTPRequest(head: head, body: body.take(), remoteIP: remoteIP, admitted: admitted)
            // A connection over a limit is not kept: it would go on holding its client's slot;
            // nor is one whose body was dropped (it may have been sending one we never asked for).
            let keepAlive = head.isKeepAlive && admitted && !droppedBody
            if context.channel.isWritable {
                respond(to: request, keepAlive: keepAlive, context: context)
            } else {
                parked = (request, keepAlive)
                // A client that never reads is closed like an idle one.
                armIdleTimeout(context: context)
            }
        }
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        let writable = context.channel.isWritable
        // Stop reading requests while the answers already written are not being read.
        try? context.channel.syncOptions?.setOption(ChannelOptions.autoRead, value: writable)
        if writable, let (request, keepAlive) = parked {
            parked = nil
            respond(to: request, keepAlive: keepAlive, context: context)
        }
        context.fireChannelWritabilityChanged()
    }

    private func respond(to request: HTTPRequest, keepAlive: Bool, context: ChannelHandlerContext) {
        let bound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
        router.route(request, on: context.eventLoop).whenComplete { result in
            let (handler, context) = bound.value
            handler.finishBody()
            switch result {
            case .success(let response): handler.write(response, keepAlive: keepAlive, context: context)
            case .failure: handler.write(.error(.internalServerError, code: "internal_error", message: "internal error"), keepAlive: false, context: context)
            }
        }
    }

    private var streamTask: RepeatedTask?

    /// The request's body admission is given back (once).
    private func finishBody() {
        releaseBody?()
        releaseBody = nil
    }

    private func write(_ response: HTTPResponse, keepAlive: Bool, context: ChannelHandlerContext) {
        assert(LockAudit.noneHeld(), "a lock is held across an HTTP write")
        if let stream = response.stream {
            writeStream(response, stream, context: context)
            return
        }
        var headers = HTTPHeaders()
        headers.add(name: "content-type", value: response.contentType)
        headers.add(name: "content-length", value: String(response.body.count))
        headers.add(name: "cache-control", value: "no-store")
        headers.add(name: "x-content-type-options", value: "nosniff")
        for (k, v) in response.extraHeaders { headers.add(name: k, value: v) }
        if !keepAlive { headers.add(name: "connection", value: "close") }
        context.write(wrapOutboundOut(.head(HTTPResponseHead(version: .http1_1, status: response.status, headers: headers))), promise: nil)
        var buffer = context.channel.allocator.buffer(capacity: response.body.count)
        buffer.writeBytes(response.body)
        context.write(wrapOutboundOut(.body(.byteBuffer(buffer))), promise: nil)
        // Before `.end` releases the next pipelined request: it may be an upgrade.
        if keepAlive { rearmUpgrade(context: context) }
        let done = context.writeAndFlush(wrapOutboundOut(.end(nil)))
        if keepAlive {
            armIdleTimeout(context: context)
        } else {
            let channel = context.channel
            done.whenComplete { _ in channel.close(promise: nil) }
        }
    }

    /// Puts a WebSocket upgrade handler back in front of this one (NIO's removes itself after
    /// a connection's first request that is not an upgrade).
    private func rearmUpgrade(context: ChannelHandlerContext) {
        guard let makeUpgradeHandler else { return }
        let pipeline = context.pipeline.syncOperations
        guard (try? pipeline.handler(type: HTTPServerUpgradeHandler.self)) == nil else { return }
        do {
            try pipeline.addHandler(try makeUpgradeHandler(pipeline), position: .before(self))
        } catch {
            relay.logger.debug("could not re-arm the upgrade handler", metadata: ["error": "\(error)"])
        }
    }

    /// Server-sent events: chunked body, one event per interval, until the client closes.
    private func writeStream(_ response: HTTPResponse, _ stream: HTTPResponse.EventStream, context: ChannelHandlerContext) {
        var headers = HTTPHeaders()
        headers.add(name: "content-type", value: response.contentType)
        headers.add(name: "cache-control", value: "no-store")
        headers.add(name: "x-accel-buffering", value: "no")
        context.write(wrapOutboundOut(.head(HTTPResponseHead(version: .http1_1, status: response.status, headers: headers))), promise: nil)
        var first = context.channel.allocator.buffer(capacity: response.body.count)
        first.writeBytes(response.body)
        context.writeAndFlush(wrapOutboundOut(.body(.byteBuffer(first))), promise: nil)
        let channel = context.channel
        let bound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
        streamTask = context.eventLoop.scheduleRepeatedTask(initialDelay: stream.interval, delay: stream.interval) { task in
            guard channel.isActive else {
                task.cancel()
                return
            }
            // A dashboard that does not read misses updates instead of buffering them.
            guard channel.isWritable else { return }
            let (handler, context) = bound.value
            let bytes = stream.chunk()
            var buffer = channel.allocator.buffer(capacity: bytes.count)
            buffer.writeBytes(bytes)
            context.writeAndFlush(handler.wrapOutboundOut(.body(.byteBuffer(buffer))), promise: nil)
        }
    }

    func channelInactive(context: ChannelHandlerContext) {
        parked = nil
        streamTask?.cancel()
        streamTask = nil
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: Error) {
        // A refused WebSocket upgrade (bad origin, over a limit, wrong path) is reported here
        // before the request itself arrives: the router answers it with a clear status.
        if error is NIOWebSocketUpgradeError { return }
        // Malformed requests were already answered with 400 by NIO's protocol error handler.
        context.close(promise: nil)
    }
}
