import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1
import NIOPosix
import NIOWebSocket

/// The server under test.
struct Target: Sendable {
    var host: String
    var port: Int
    /// The WebSocket path: `/socket.io/?EIO=4&transport=websocket` for Socket.IO servers.
    var path: String
}

/// Opens generator sockets: TCP (optionally from a chosen loopback source address), HTTP
/// upgrade, then a `LoadConnection`.
struct Connector: Sendable {
    let group: MultiThreadedEventLoopGroup
    let board: StatsBoard
    let target: Target
    let wire: WireProtocol

    /// Opens one socket on `loop`; the future succeeds once it is connected (and in its room).
    func open(on loop: any EventLoop, token: String, room: String?, sourceIP: String?, observesTyping: Bool = false) -> EventLoopFuture<OpenedConnection> {
        let ready = loop.makePromise(of: Void.self)
        let (wire, board) = (self.wire, self.board)
        return open(on: loop, sourceIP: sourceIP, ready: ready) { channel in
            let handler = LoadConnection(wire: wire, token: token, room: room, stats: board.stats(for: channel.eventLoop), ready: ready)
            handler.observesTyping = observesTyping
            return handler
        }.map { pair in OpenedConnection(channel: pair.0, handler: pair.1) }
    }

    /// Opens one socket on `loop` with the WebSocket handler `make` builds (on the channel's
    /// loop); the future succeeds with the channel and the handler once `ready` does, and fails
    /// when `ready` fails or the channel closes first.
    func open<Handler: ChannelInboundHandler & SendableMetatype>(
        on loop: any EventLoop, sourceIP: String?, ready: EventLoopPromise<Void>, make: @escaping @Sendable (any Channel) -> Handler
    ) -> EventLoopFuture<(any Channel, UnsafeSendable<Handler>)> {
        let handlerBox = NIOLockedValueBox<UnsafeSendable<Handler>?>(nil)
        let target = self.target
        var bootstrap = ClientBootstrap(group: loop)
            .connectTimeout(.seconds(10))
            .channelOption(ChannelOptions.socketOption(.tcp_nodelay), value: 1)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    let handler = make(channel)
                    handlerBox.withLockedValue { $0 = UnsafeSendable(handler) }
                    let requester = UpgradeRequester(host: target.host, port: target.port, path: target.path)
                    let bound = NIOLoopBound(requester, eventLoop: channel.eventLoop)
                    // The upgrade completes on this channel's loop: the handler stays on it.
                    let boundHandler = NIOLoopBound(handler, eventLoop: channel.eventLoop)
                    let upgrader = NIOWebSocketClientUpgrader(maxFrameSize: 1 << 24, automaticErrorHandling: false) { channel, _ in
                        channel.eventLoop.makeCompletedFuture {
                            try channel.pipeline.syncOperations.addHandler(boundHandler.value)
                        }
                    }
                    try channel.pipeline.syncOperations.addHTTPClientHandlers(
                        leftOverBytesStrategy: .forwardBytes,
                        withClientUpgrade: (upgraders: [upgrader], completionHandler: { context in
                            context.pipeline.syncOperations.removeHandler(bound.value, promise: nil)
                        }))
                    try channel.pipeline.syncOperations.addHandler(requester)
                }
            }
        if let sourceIP, let address = try? SocketAddress(ipAddress: sourceIP, port: 0) {
            bootstrap = bootstrap.bind(to: address)
        }
        return bootstrap.connect(host: target.host, port: target.port).flatMap { channel in
            channel.closeFuture.whenComplete { _ in ready.fail(LoadError.closedBeforeReady) }
            return ready.futureResult.flatMapThrowing {
                guard let handler = handlerBox.withLockedValue({ $0 }) else { throw LoadError.upgradeFailed }
                return (channel, handler)
            }
        }
    }
}

/// A ready generator socket.
struct OpenedConnection: @unchecked Sendable {
    let channel: any Channel
    let handler: UnsafeSendable<LoadConnection>
    var connection: LoadConnection { handler.value }
}

/// Sends the upgrade request when the TCP connection is up.
final class UpgradeRequester: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPClientResponsePart
    typealias OutboundOut = HTTPClientRequestPart

    let host: String
    let port: Int
    let path: String

    init(host: String, port: Int, path: String) {
        self.host = host
        self.port = port
        self.path = path
    }

    func channelActive(context: ChannelHandlerContext) {
        var headers = HTTPHeaders()
        headers.add(name: "Host", value: "\(host):\(port)")
        headers.add(name: "Content-Length", value: "0")
        context.write(wrapOutboundOut(.head(HTTPRequestHead(version: .http1_1, method: .GET, uri: path, headers: headers))), promise: nil)
        context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: nil)
        context.fireChannelActive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        // A non-101 answer: the upgrade failed.
        if case .head(let head) = unwrapInboundIn(data), head.status != .switchingProtocols {
            context.close(promise: nil)
        }
    }
}
