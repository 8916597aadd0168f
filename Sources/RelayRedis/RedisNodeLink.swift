import Logging
import NIOCore
import NIOPosix

/// One Redis server's pair of connections: a pipelined command connection and a subscriber
/// connection (pub/sub). Made by `RedisClient`, one per master it routes to; loop-confined to
/// the client's event loop (`@unchecked Sendable`: every method runs on `eventLoop`; the
/// closures that capture it hop there first).
final class RedisNodeLink: @unchecked Sendable {
    let address: RedisEndpoint.Address
    private let eventLoop: any EventLoop
    private var commands: (any Channel)?
    private var subscriber: (any Channel)?
    private(set) var isUp = false
    private(set) var protocolVersion = 2
    private(set) var shardedPubSub = false
    private var closed = false

    init(address: RedisEndpoint.Address, eventLoop: any EventLoop) {
        self.address = address
        self.eventLoop = eventLoop
    }

    /// Connects both connections and runs the handshake (AUTH, SELECT, HELLO 3, the sharded
    /// pub/sub probe). `onPush` gets the subscriber's messages, `onClosed` fires once when either
    /// connection goes away after it was made.
    func connect(
        password: String?, database: Int, timeout: TimeAmount,
        onPush: @escaping @Sendable (RESPValue) -> Void, onClosed: @escaping @Sendable (RedisNodeLink) -> Void
    ) -> EventLoopFuture<Void> {
        let loop = eventLoop
        let commandsFuture = Self.bootstrap(loop, timeout: timeout) { _ in }.connect(host: address.host, port: address.port)
        let subscriberFuture = Self.bootstrap(loop, timeout: timeout) { value in
            loop.execute { onPush(value) }
        }.connect(host: address.host, port: address.port)
        return commandsFuture.and(subscriberFuture).flatMap { commands, subscriber -> EventLoopFuture<Void> in
            self.commands = commands
            self.subscriber = subscriber
            for c in [commands, subscriber] {
                c.closeFuture.whenComplete { _ in
                    loop.execute {
                        guard !self.closed else { return }
                        self.close()
                        onClosed(self)
                    }
                }
            }
            // A server that accepts but never answers: the handshake is bounded too.
            let timer = loop.scheduleTask(in: timeout) { self.close() }
            return self.handshake(password: password, database: database).always { _ in timer.cancel() }
        }.map {
            self.isUp = !self.closed
        }.flatMapErrorThrowing { error in
            commandsFuture.whenSuccess { $0.close(promise: nil) }
            subscriberFuture.whenSuccess { $0.close(promise: nil) }
            self.closed = true
            throw error
        }
    }

    func close() {
        closed = true
        isUp = false
        commands?.close(promise: nil)
        subscriber?.close(promise: nil)
        commands = nil
        subscriber = nil
    }

    /// Writes an encoded command; `asking` sends `ASKING` first (a cluster's one-off redirect).
    func send(_ bytes: ByteBuffer, asking: Bool = false) -> EventLoopFuture<RESPValue> {
        guard isUp, let channel = commands else { return eventLoop.makeFailedFuture(RESPError.unavailable) }
        if asking {
            var ask = channel.allocator.buffer(capacity: 24)
            RESPParser.encodeCommand(["ASKING"], into: &ask)
            channel.write(RedisConnectionHandler.RedisRequest(bytes: ask, promise: eventLoop.makePromise(of: RESPValue.self)), promise: nil)
        }
        return Self.write(bytes, to: channel, on: eventLoop)
    }

    func send(_ args: [String]) -> EventLoopFuture<RESPValue> {
        var bytes = ByteBufferAllocator().buffer(capacity: 64)
        RESPParser.encodeCommand(args, into: &bytes)
        return send(bytes)
    }

    /// Writes a request whose promise is failed if the write itself fails (a channel that
    /// closed meanwhile never hands the request to the handler, which would otherwise never
    /// answer it).
    static func write(_ bytes: ByteBuffer, to channel: any Channel, on loop: any EventLoop) -> EventLoopFuture<RESPValue> {
        let promise = loop.makePromise(of: RESPValue.self)
        let written = loop.makePromise(of: Void.self)
        written.futureResult.whenFailure { promise.fail($0) }
        channel.writeAndFlush(RedisConnectionHandler.RedisRequest(bytes: bytes, promise: promise), promise: written)
        return promise.futureResult
    }

    /// A fire-and-forget command on the subscriber connection.
    func writeSubscriber(_ args: [String]) {
        guard isUp, let subscriber else { return }
        var bytes = subscriber.allocator.buffer(capacity: 64)
        RESPParser.encodeCommand(args, into: &bytes)
        subscriber.writeAndFlush(RedisConnectionHandler.RedisRequest(bytes: bytes, promise: nil), promise: nil)
    }

    static func bootstrap(_ loop: any EventLoop, timeout: TimeAmount, onPush: @escaping @Sendable (RESPValue) -> Void) -> ClientBootstrap {
        ClientBootstrap(group: loop)
            .connectTimeout(timeout)
            .channelOption(ChannelOptions.socketOption(.tcp_nodelay), value: 1)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(RedisConnectionHandler(onPush: onPush))
                }
            }
    }

    private func raw(_ channel: any Channel, _ args: [String]) -> EventLoopFuture<RESPValue> {
        var bytes = ByteBufferAllocator().buffer(capacity: 64)
        RESPParser.encodeCommand(args, into: &bytes)
        return Self.write(bytes, to: channel, on: eventLoop)
    }

    private func handshake(password: String?, database: Int) -> EventLoopFuture<Void> {
        guard let commands, let subscriber else { return eventLoop.makeFailedFuture(RESPError.connectionClosed) }
        var steps: [([String], any Channel)] = []
        if let password {
            steps.append((["AUTH", password], commands))
            steps.append((["AUTH", password], subscriber))
        }
        if database != 0 { steps.append((["SELECT", String(database)], commands)) }
        var future = eventLoop.makeSucceededVoidFuture()
        for (args, channel) in steps { future = future.flatMap { self.raw(channel, args).map { _ in } } }
        return future.flatMap {
            self.raw(commands, ["HELLO", "3"]).map { _ in 3 }.recover { _ in 2 }
        }.flatMap { (version: Int) -> EventLoopFuture<Void> in
            self.protocolVersion = version
            return self.raw(commands, ["COMMAND", "INFO", "SPUBLISH"]).map { reply in
                // Unknown commands come back as a null entry.
                if let first = reply.elements?.first, first != .null { self.shardedPubSub = true } else { self.shardedPubSub = false }
            }.recover { _ in self.shardedPubSub = false }
        }
    }
}
