import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1
import NIOPosix
import NIOSSL
import NIOWebSocket
import RelayBackends
import RelayCluster
import RelayCore
import RelayLocks
import RelayRedis
import RelayStore
import ServiceLifecycle

/// The relay's listening server: one TCP listener, HTTP/1.1 for the API and the WebSocket
/// upgrade, then a `WebSocketTransport` per socket, or Engine.IO long-polling (`PollingEndpoint`).
public final class RelayServer: Sendable {
    public let context: RelayContext
    public let group: MultiThreadedEventLoopGroup
    private let ownsGroup: Bool
    private let store: SQLiteReceiptStore?
    private let replicator: ReceiptReplicator?
    private let channelBox = AuditedLock<(any Channel)?>(nil)
    private let trimmerBox = AuditedLock<HeapTrimmer?>(nil)

    /// Creates a server with its own event loops (one per configured thread).
    public static func make(configuration: RelayConfiguration, logger: Logger, clock: RelayClock = .system) async throws -> RelayServer {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: configuration.listener.eventLoopThreads)
        let loops = Array(group.makeIterator())
        let metrics = RelayMetrics()
        var cluster: ClusterBus?
        let nodeID = configuration.cluster.nodeID ?? "node-" + TokenIssuer.randomSecret(bytes: 4)
        if let url = configuration.cluster.redisURL, let endpoint = RedisEndpoint(url: url) {
            let options = ClusterBus.Options(heartbeatMs: configuration.cluster.heartbeatMs)
            var logger = logger
            logger[metadataKey: "node"] = "\(nodeID)"
            cluster = ClusterBus(nodeID: nodeID, redis: RedisClient(endpoint: endpoint, eventLoop: loops[0], logger: logger), options: options, metrics: metrics.cluster, logger: logger)
        }
        let webhooks = Webhooks.make(settings: configuration.webhooks, nodeID: nodeID, cluster: cluster, clock: clock, metrics: metrics, logger: logger)
        // Memory or Redis, chosen here once.
        let backends = NodeBackends.make(configuration: configuration, clock: clock, cluster: cluster, webhooks: webhooks)
        let hub = Hub(eventLoops: loops, configuration: configuration, backends: backends, clock: clock, metrics: metrics)
        let verifier = try await TokenVerifier(algorithm: configuration.auth.jwt, leewaySeconds: configuration.auth.jwtLeewaySeconds)
        var options = SQLiteReceiptStore.Options(
            maxBatch: configuration.receipts.maxBatch, retentionDays: configuration.receipts.retentionDays, replicate: cluster != nil)
        options.onCommit = { batch, new, nanoseconds in
            metrics.receipts.commit.recordNanoseconds(nanoseconds)
            metrics.receipts.batch.record(batch)
            metrics.receipts.stored.increment(by: Int64(new))
        }
        let store = try SQLiteReceiptStore(path: configuration.receipts.databasePath, options: options, logger: logger)
        let context = RelayContext(configuration: configuration, hub: hub, verifier: verifier, receipts: store, logger: logger)
        let replicator = cluster.map { ReceiptReplicator(store: store, redis: $0.redis, nodeID: $0.nodeID, logger: logger) }
        return RelayServer(context: context, group: group, ownsGroup: true, store: store, replicator: replicator)
    }

    init(context: RelayContext, group: MultiThreadedEventLoopGroup, ownsGroup: Bool, store: SQLiteReceiptStore?, replicator: ReceiptReplicator? = nil) {
        self.context = context
        self.store = store
        self.replicator = replicator
        self.group = group
        self.ownsGroup = ownsGroup
    }

    /// The node's background work (lag monitor, history trims), for the service group that
    /// runs the server.
    public var backgroundServices: [any Service] { context.hub.backgroundServices }

    /// The bound address once `start` returned.
    public var localAddress: SocketAddress? { channelBox.withLockedValue { $0?.localAddress } }

    /// Binds and starts accepting.
    public func start() async throws {
        let relay = context
        let configuration = relay.configuration
        let tls = try Self.makeTLSContext(configuration)
        let bootstrap = ServerBootstrap(group: group)
            .serverChannelOption(ChannelOptions.backlog, value: 4096)
            .serverChannelOption(ChannelOptions.socketOption(.so_reuseaddr), value: 1)
            // A reconnect storm's connections are taken off the kernel's queue 256 per loop
            // iteration, not NIO's 4: a try that waits in the kernel's queue waits behind every
            // socket already taken. With 10 000 sockets back after a crash, 64 left the slowest
            // try at 5.4 s and 256 at 4.3-4.6 s, the users connected meanwhile at message p99
            // 57 then 178-188 ms (docs/BENCHMARKS.md, "A reconnect storm").
            .serverChannelOption(ChannelOptions.maxMessagesPerRead, value: 256)
            .childChannelOption(ChannelOptions.socketOption(.tcp_nodelay), value: 1)
            .childChannelOption(ChannelOptions.writeBufferWaterMark, value: .init(low: 32 * 1024, high: 64 * 1024))
            .childChannelOption(ChannelOptions.maxMessagesPerRead, value: 16)
            // NIO keeps each socket's last receive buffer for the next read: start it small
            // (chat frames are small; it grows when reads fill it) instead of 2 KiB per idle socket.
            // NIO's adaptive sizing, in an allocator small enough to need no heap box per socket.
            .childChannelOption(ChannelOptions.recvAllocator, value: CompactRecvAllocator(minimum: 64, initial: 256, maximum: 65_536))
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    // With PROXY protocol the header comes first, before TLS; the rest of the
                    // pipeline is set up once it names the client.
                    if configuration.listener.proxyProtocol {
                        try channel.pipeline.syncOperations.addHandler(ProxyProtocolHandler(
                            trusted: configuration.listener.trustedProxies, timeout: .milliseconds(Int64(configuration.listener.handshakeTimeoutMs)),
                            logger: relay.logger
                        ) { channel, client in
                            if let tls {
                                try channel.pipeline.syncOperations.addHandler(NIOSSLServerHandler(context: tls))
                            }
                            try Self.configure(channel: channel, relay: relay, connectionAddress: client)
                        })
                        return
                    }
                    if let tls {
                        try channel.pipeline.syncOperations.addHandler(NIOSSLServerHandler(context: tls))
                    }
                    try Self.configure(channel: channel, relay: relay)
                }
            }
        let channel = try await bootstrap.bind(host: configuration.listener.host, port: configuration.listener.port).get()
        if configuration.lifecycle.heapTrimIntervalMs > 0, let loop = relay.hub.partitions.first?.eventLoop {
            let trimmer = HeapTrimmer(
                on: loop, interval: .milliseconds(Int64(configuration.lifecycle.heapTrimIntervalMs)), afterSessions: configuration.lifecycle.heapTrimAfterSessions,
                metrics: relay.hub.metrics)
            trimmerBox.withLockedValue { $0 = trimmer }
        }
        relay.hub.backends.cluster?.start()
        replicator?.start()
        _ = AdminAPI.startedAt
        channelBox.withLockedValue { $0 = channel }
    }

    /// The TLS context when a certificate and key are configured.
    static func makeTLSContext(_ configuration: RelayConfiguration) throws -> NIOSSLContext? {
        guard let certPath = configuration.listener.tlsCertificatePath, let keyPath = configuration.listener.tlsKeyPath else { return nil }
        let chain = try NIOSSLCertificate.fromPEMFile(certPath).map { NIOSSLCertificateSource.certificate($0) }
        let key = try NIOSSLPrivateKey(file: keyPath, format: .pem)
        var tls = TLSConfiguration.makeServerConfiguration(certificateChain: chain, privateKey: .privateKey(key))
        tls.minimumTLSVersion = .tlsv12
        tls.applicationProtocols = ["http/1.1"]
        return try NIOSSLContext(configuration: tls)
    }

    /// The HTTP pipeline of one connection. `connectionAddress` is the client a PROXY header
    /// declared; by default the TCP peer. Admission (per-IP and total caps) and the client
    /// address of every request follow `ConnectionAdmission`.
    static func configure(channel: any Channel, relay: RelayContext, connectionAddress: IPAddress? = nil) throws {
        let client = NIOLoopBound(
            ConnectionAdmission(
                admission: relay.admission, trusted: relay.configuration.listener.trustedProxies,
                connectionAddress: connectionAddress ?? ConnectionAdmission.peerAddress(of: channel)),
            eventLoop: channel.eventLoop)
        // The admission is given back when the connection closes, by the handler that holds it
        // then: the HTTP handler, or after an upgrade the WebSocket's codec (no callback on the
        // channel's close future per connection: a closure context for the socket's whole life).
        do {
            try configurePipeline(channel: channel, relay: relay, client: client)
        } catch {
            client.value.release()
            throw error
        }
    }

    /// `configure`'s handlers, the connection's `client` admission already counted.
    private static func configurePipeline(channel: any Channel, relay: RelayContext, client: NIOLoopBound<ConnectionAdmission>) throws {
        let origins = relay.configuration.listener.originPolicy
        let httpHandler = HTTPHandler(relay: relay, router: HTTPRouter(relay: relay), client: client.value)
        let boundHTTPHandler = NIOLoopBound(httpHandler, eventLoop: channel.eventLoop)
        let configuration = relay.configuration
        // NIO's WebSocket upgrade, with the socket's pipeline all ours (WebSocketUpgrader).
        let upgrader = WebSocketUpgrader(
            shouldUpgrade: { channel, head in
                let admitted = client.value.resolve(head).admitted
                let query = QueryString(uri: head.uri)
                let path = query.path
                let originOK = origins.allows(origin: head.headers.first(name: "origin"), host: head.headers.first(name: "host"))
                let isEcho = configuration.listener.echoPath.map { $0 == path } ?? false
                // A `sid` upgrades a long-polling session of this node (and must name one).
                let upgradesKnownSession = query["sid"].map { relay.pollingSessions.lookup($0) != nil } ?? true
                let isEngineIO = (path == "/socket.io/" || path == "/socket.io") && query["EIO"] == "4" && query["transport"] == "websocket" && upgradesKnownSession
                // RFC 6455 §4.2.1: a GET over HTTP/1.1 or later (HTTP/1.0 and POST upgrades are refused).
                let wellFormed = UpgradeRequestRules.isAcceptable(head)
                // A new session while too many CONNECTs are pending: the router answers 503.
                let busy = isEngineIO && query["sid"] == nil && relay.admission.pending.isFull
                guard admitted, originOK, wellFormed, !busy, isEcho || isEngineIO else {
                    return channel.eventLoop.makeSucceededFuture(nil)
                }
                var headers = HTTPHeaders()
                if configuration.engine.deflateEnabled, let deflate = PerMessageDeflateNegotiation.negotiate(head.headers["sec-websocket-extensions"]) {
                    headers.add(name: "Sec-WebSocket-Extensions", value: deflate.responseHeader)
                }
                return channel.eventLoop.makeSucceededFuture(headers)
            },
            upgradePipelineHandler: { channel, head in
                let info = HandshakeInfo(request: head, remoteIP: client.value.resolve(head).ip, deflateEnabled: configuration.engine.deflateEnabled)
                let path = QueryString(uri: head.uri).path
                return channel.eventLoop.makeCompletedFuture {
                    let pipeline = channel.pipeline.syncOperations
                    // Frames both ways in one handler; text is checked as it arrives, on every
                    // socket (Autobahn 6.4.x: fail fast). The decoder's limit is maxPayload.
                    // The codec gives the connection's admission back when it closes.
                    let codec = WebSocketFrameCodec(maxFrameSize: configuration.engine.maxPayload, admission: client.value)
                    do {
                        try pipeline.addHandler(codec)
                    } catch {
                        client.value.release()
                        throw error
                    }
                    if let echo = configuration.listener.echoPath, echo == path {
                        let partition = relay.hub.partition(for: channel.eventLoop)
                        try pipeline.addHandler(
                            WebSocketEchoHandler(maxMessageBytes: configuration.engine.maxPayload, deflate: info.deflate, partition: partition, thresholdBytes: configuration.engine.deflateThresholdBytes))
                    } else {
                        // Small frames only until CONNECT succeeds (the session's limits in force,
                        // which the transport hands the codec whenever they change).
                        codec.frameLimit = min(configuration.engine.maxConnectPayload, configuration.engine.maxPayload)
                        let probeOf = QueryString(uri: head.uri)["sid"].flatMap { relay.pollingSessions.lookup($0) }
                        try pipeline.addHandler(WebSocketTransport(relay: relay, handshake: info, probeOf: probeOf))
                    }
                }
            })
        // NIO's upgrade handler only looks at a connection's first request; clients that
        // upgrade on a reused keep-alive connection (python-engineio's aiohttp pool does, after
        // polling) get a fresh one after every answer.
        httpHandler.makeUpgradeHandler = { pipeline in
            let encoder = try pipeline.handler(type: HTTPResponseEncoder.self)
            var extras: [RemovableChannelHandler] = [
                try pipeline.handler(type: ByteToMessageHandler<HTTPRequestDecoder>.self), try pipeline.handler(type: HTTPServerPipelineHandler.self),
            ]
            if let validator = try? pipeline.handler(type: NIOHTTPResponseHeadersValidator.self) { extras.append(validator) }
            if let errors = try? pipeline.handler(type: HTTPServerProtocolErrorHandler.self) { extras.append(errors) }
            return HTTPServerUpgradeHandler(upgraders: [upgrader], httpEncoder: encoder, extraHTTPHandlers: extras) { context in
                boundHTTPHandler.value.handOverAdmission()
                context.pipeline.syncOperations.removeHandler(boundHTTPHandler.value, promise: nil)
            }
        }
        try channel.pipeline.syncOperations.configureHTTPServerPipeline(
            withPipeliningAssistance: true,
            withServerUpgrade: (
                upgraders: [upgrader],
                completionHandler: { context in
                    // Right before the upgrade adds the codec that takes the admission over.
                    boundHTTPHandler.value.handOverAdmission()
                    context.pipeline.syncOperations.removeHandler(boundHTTPHandler.value, promise: nil)
                }
            ),
            withErrorHandling: true)
        try channel.pipeline.syncOperations.addHandler(httpHandler)
    }

    /// Graceful shutdown: stop accepting, tell sockets to go (Engine.IO close, WebSocket 1001)
    /// in batches (`LifecycleSettings.drainBatch`: spread when other nodes take them, all at
    /// once on a node alone), commit the receipts already received, stop the event loops.
    /// Bounded by `shutdownTimeoutMs`.
    public func shutdown() async throws {
        let configuration = context.configuration
        let deadline = NIODeadline.now() + .milliseconds(Int64(configuration.lifecycle.shutdownTimeoutMs))
        if let channel = channelBox.withLockedValue({ $0 }) {
            try? await channel.close().get()
        }
        context.logger.info("shutting down: no longer accepting; draining sockets")
        let hub = context.hub
        hub.stopTimers()
        trimmerBox.withLockedValue { $0?.cancel() }
        // Ten batches a second.
        let batch = configuration.lifecycle.drainBatch(otherNodes: hub.backends.cluster != nil)
        var drained = 0
        var rounds = 0
        while NIODeadline.now() < deadline {
            var closedThisRound = 0
            for partition in hub.partitions {
                let share = max(1, batch / hub.partitions.count)
                closedThisRound += (try? await partition.eventLoop.submit {
                    let sinks = partition.allSinks().filter { !$0.isClosing }
                    for sink in sinks.prefix(share) { sink.goAway() }
                    return min(share, sinks.count)
                }.get()) ?? 0
            }
            drained += closedThisRound
            if closedThisRound == 0 { break }
            rounds += 1
            try? await Task.sleep(nanoseconds: 100_000_000)
        }
        // Past the deadline: close whatever is left at once.
        for partition in hub.partitions {
            try? await partition.eventLoop.submit {
                for sink in partition.allSinks() { sink.close(code: CloseCode.goingAway, reason: "server shutting down") }
            }.get()
        }
        // Let the close frames go out (bounded by the deadline).
        while hub.connectionCount > 0 && NIODeadline.now() < deadline {
            try? await Task.sleep(nanoseconds: 20_000_000)
        }
        context.logger.info("drained sockets", metadata: ["count": "\(drained)", "rounds": "\(rounds)"])
        hub.endPresenceHolds()
        context.receiptServices.flushWindows()
        replicator?.stop()
        // Webhooks for the sockets just closed (and this node's leftovers) go out first.
        await hub.backends.webhooks?.shutdown(deadline: max(NIODeadline.now() + .seconds(1), min(deadline, NIODeadline.now() + .seconds(5))))
        await hub.backends.cluster?.stop()
        // Receipts queued before the sockets closed are committed before we exit.
        await store?.close()
        if ownsGroup {
            try await group.shutdownGracefully()
        }
    }
}
