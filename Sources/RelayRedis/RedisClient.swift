import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix

/// A small Redis client on SwiftNIO, written by hand because no Swift Redis client is reachable
/// here: one pipelined command connection (RESP3 when the server speaks it, RESP2 otherwise)
/// and one subscriber connection (pub/sub, sharded pub/sub when available), both re-established
/// with exponential backoff and jitter, with subscriptions restored after every reconnect.
///
/// All state lives on one event loop; the public methods may be called from any thread.
/// (`@unchecked Sendable`: the mutable state is only touched on `eventLoop`; public methods hop
/// there with `execute` or a future.)
public final class RedisClient: @unchecked Sendable {
    public struct Options: Sendable {
        public var connectTimeout: TimeAmount = .seconds(2)
        public var initialBackoff: TimeAmount = .milliseconds(100)
        public var maxBackoff: TimeAmount = .seconds(5)
        public var commandTimeout: TimeAmount = .seconds(5)
        public init() {}
    }

    public let endpoint: RedisEndpoint
    public let eventLoop: any EventLoop
    let options: Options
    let logger: Logger

    // Loop-confined state.
    private var commands: (any Channel)?
    private var subscriber: (any Channel)?
    private var up = false
    private var stopped = false
    private var attempt = 0
    private var reconnectTask: Scheduled<Void>?
    private var channels: Set<String> = []
    /// Channels the server confirmed on the current link, and who waits for a confirmation.
    private var confirmed: Set<String> = []
    private var confirmationWaiters: [String: [EventLoopPromise<Void>]] = [:]
    private var protocolVersion = 2
    private var shardedPubSub = false
    private var onMessage: (@Sendable (String, ByteBuffer) -> Void)?
    private var onLinkChange: (@Sendable (Bool) -> Void)?
    private let upFlag = NIOLockedValueBox(false)

    public init(endpoint: RedisEndpoint, eventLoop: any EventLoop, options: Options = Options(), logger: Logger = Logger(label: "relay.redis")) {
        self.endpoint = endpoint
        self.eventLoop = eventLoop
        self.options = options
        self.logger = logger
    }

    /// Whether both connections are up (readable from any thread).
    public var isUp: Bool { upFlag.withLockedValue { $0 } }

    /// Starts connecting; `onMessage` gets every pub/sub message, `onLinkChange` every up/down.
    public func start(onMessage: @escaping @Sendable (String, ByteBuffer) -> Void, onLinkChange: @escaping @Sendable (Bool) -> Void) {
        eventLoop.execute {
            self.onMessage = onMessage
            self.onLinkChange = onLinkChange
            self.connect()
        }
    }

    public func stop() async {
        try? await eventLoop.submit {
            self.stopped = true
            self.reconnectTask?.cancel()
            self.commands?.close(promise: nil)
            self.subscriber?.close(promise: nil)
        }.get()
    }

    /// Sends one command; fails at once with `.unavailable` while the link is down.
    public func send(_ args: [String]) -> EventLoopFuture<RESPValue> {
        var bytes = ByteBufferAllocator().buffer(capacity: 64)
        RESPParser.encodeCommand(args, into: &bytes)
        return send(bytes)
    }

    func send(_ bytes: ByteBuffer) -> EventLoopFuture<RESPValue> {
        eventLoop.flatSubmit {
            guard self.up, let channel = self.commands else { return self.eventLoop.makeFailedFuture(RESPError.unavailable) }
            let promise = self.eventLoop.makePromise(of: RESPValue.self)
            channel.writeAndFlush(RedisConnectionHandler.RedisRequest(bytes: bytes, promise: promise), promise: nil)
            let timeout = self.eventLoop.scheduleTask(in: self.options.commandTimeout) { promise.fail(RESPError.unavailable) }
            promise.futureResult.whenComplete { _ in timeout.cancel() }
            return promise.futureResult
        }
    }

    /// Sends one command whose last argument is raw bytes; `args` is given whether sharded pub/sub
    /// is in use (a script that publishes picks `SPUBLISH` or `PUBLISH`).
    public func send(_ args: @escaping @Sendable (_ shardedPubSub: Bool) -> [String], payload: ByteBuffer) -> EventLoopFuture<RESPValue> {
        eventLoop.flatSubmit {
            var bytes = ByteBufferAllocator().buffer(capacity: payload.readableBytes + 256)
            RESPParser.encodeCommand(args(self.shardedPubSub), payload: payload, into: &bytes)
            return self.send(bytes)
        }
    }

    /// Publishes raw bytes (SPUBLISH when sharded pub/sub is available). The future tells how
    /// many subscribers got it, or fails while the link is down.
    @discardableResult
    public func publish(_ channel: String, _ payload: ByteBuffer) -> EventLoopFuture<RESPValue> {
        eventLoop.flatSubmit {
            var bytes = ByteBufferAllocator().buffer(capacity: payload.readableBytes + channel.utf8.count + 32)
            RESPParser.encodeCommand([self.shardedPubSub ? "SPUBLISH" : "PUBLISH", channel], payload: payload, into: &bytes)
            return self.send(bytes)
        }
    }

    /// Adds channels to the subscriptions (kept across reconnects).
    public func subscribe(_ names: [String]) {
        eventLoop.execute {
            let new = names.filter { self.channels.insert($0).inserted }
            if self.up, !new.isEmpty { self.writeSubscriber([self.shardedPubSub ? "SSUBSCRIBE" : "SUBSCRIBE"] + new) }
        }
    }

    /// Completes once the server confirmed the subscription to `name` on the current link (at
    /// once if it already did); fails after the command timeout.
    public func subscribed(_ name: String) -> EventLoopFuture<Void> {
        eventLoop.flatSubmit {
            if self.confirmed.contains(name) { return self.eventLoop.makeSucceededVoidFuture() }
            let promise = self.eventLoop.makePromise(of: Void.self)
            self.confirmationWaiters[name, default: []].append(promise)
            let timeout = self.eventLoop.scheduleTask(in: self.options.commandTimeout) { promise.fail(RESPError.unavailable) }
            promise.futureResult.whenComplete { _ in timeout.cancel() }
            return promise.futureResult
        }
    }

    public func unsubscribe(_ names: [String]) {
        eventLoop.execute {
            let gone = names.filter { self.channels.remove($0) != nil }
            // Not confirmed any more from now: a subscription made again must be confirmed anew.
            self.confirmed.subtract(gone)
            if self.up, !gone.isEmpty { self.writeSubscriber([self.shardedPubSub ? "SUNSUBSCRIBE" : "UNSUBSCRIBE"] + gone) }
        }
    }

    /// Whether the server has sharded pub/sub (Redis ≥ 7), as detected at connect.
    public var usesShardedPubSub: EventLoopFuture<Bool> { eventLoop.submit { self.shardedPubSub } }
    public var respVersion: EventLoopFuture<Int> { eventLoop.submit { self.protocolVersion } }

    // MARK: Connecting

    private func bootstrap(onPush: @escaping @Sendable (RESPValue) -> Void) -> ClientBootstrap {
        ClientBootstrap(group: eventLoop)
            .connectTimeout(options.connectTimeout)
            .channelOption(ChannelOptions.socketOption(.tcp_nodelay), value: 1)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(RedisConnectionHandler(onPush: onPush))
                }
            }
    }

    private func connect() {
        guard !stopped else { return }
        let loop = eventLoop
        let host = endpoint.host, port = endpoint.port
        let commandsFuture = bootstrap { _ in }.connect(host: host, port: port)
        let subscriberFuture = bootstrap { [weak self] value in
            guard let client = self else { return }
            loop.execute { client.handleSubscriberMessage(value) }
        }.connect(host: host, port: port)
        commandsFuture.and(subscriberFuture).flatMap { commands, subscriber in
            self.eventLoop.submit {
                self.commands = commands
                self.subscriber = subscriber
                for c in [commands, subscriber] {
                    c.closeFuture.whenComplete { _ in loop.execute { self.linkLost(c) } }
                }
            }.flatMap { self.handshake(commands, subscriber) }
        }.whenComplete { result in
            switch result {
            case .success:
                self.attempt = 0
                self.setUp(true)
                if !self.channels.isEmpty { self.writeSubscriber([self.shardedPubSub ? "SSUBSCRIBE" : "SUBSCRIBE"] + self.channels.sorted()) }
                self.logger.info("redis link up", metadata: ["endpoint": "\(host):\(port)", "resp": "\(self.protocolVersion)", "sharded": "\(self.shardedPubSub)"])
            case .failure(let error):
                self.logger.debug("redis connect failed", metadata: ["error": "\(error)"])
                commandsFuture.whenSuccess { $0.close(promise: nil) }
                subscriberFuture.whenSuccess { $0.close(promise: nil) }
                self.scheduleReconnect()
            }
        }
    }

    /// AUTH, SELECT, HELLO 3 (RESP3 when the server has it), and the sharded pub/sub probe.
    private func handshake(_ commands: any Channel, _ subscriber: any Channel) -> EventLoopFuture<Void> {
        @Sendable func raw(_ channel: any Channel, _ args: [String]) -> EventLoopFuture<RESPValue> {
            var bytes = ByteBufferAllocator().buffer(capacity: 64)
            RESPParser.encodeCommand(args, into: &bytes)
            let promise = eventLoop.makePromise(of: RESPValue.self)
            channel.writeAndFlush(RedisConnectionHandler.RedisRequest(bytes: bytes, promise: promise), promise: nil)
            return promise.futureResult
        }
        var steps: [([String], any Channel)] = []
        if let password = endpoint.password {
            steps.append((["AUTH", password], commands))
            steps.append((["AUTH", password], subscriber))
        }
        if endpoint.database != 0 { steps.append((["SELECT", String(endpoint.database)], commands)) }
        var future = eventLoop.makeSucceededVoidFuture()
        for (args, channel) in steps { future = future.flatMap { raw(channel, args).map { _ in } } }
        return future.flatMap {
            raw(commands, ["HELLO", "3"]).map { _ in 3 }.recover { _ in 2 }
        }.flatMap { (version: Int) -> EventLoopFuture<Void> in
            self.protocolVersion = version
            return raw(commands, ["COMMAND", "INFO", "SPUBLISH"]).map { reply in
                // Unknown commands come back as a null entry.
                if let first = reply.elements?.first, first != .null { self.shardedPubSub = true } else { self.shardedPubSub = false }
            }.recover { _ in self.shardedPubSub = false }
        }
    }

    private func writeSubscriber(_ args: [String]) {
        guard let subscriber else { return }
        var bytes = subscriber.allocator.buffer(capacity: 64)
        RESPParser.encodeCommand(args, into: &bytes)
        subscriber.writeAndFlush(RedisConnectionHandler.RedisRequest(bytes: bytes, promise: nil), promise: nil)
    }

    private func handleSubscriberMessage(_ value: RESPValue) {
        guard let items = value.elements, items.count >= 3, let kind = items[0].string else { return }
        switch kind.lowercased() {
        case "message", "smessage":
            if let channel = items[1].string, case .bulkString(let payload) = items[2] { onMessage?(channel, payload) }
        case "subscribe", "ssubscribe":
            guard let channel = items[1].string else { return }
            confirmed.insert(channel)
            for waiter in confirmationWaiters.removeValue(forKey: channel) ?? [] { waiter.succeed(()) }
        case "unsubscribe", "sunsubscribe":
            if let channel = items[1].string { confirmed.remove(channel) }
        default:
            break
        }
    }

    private func linkLost(_ channel: any Channel) {
        guard channel === commands || channel === subscriber else { return }
        commands?.close(promise: nil)
        subscriber?.close(promise: nil)
        commands = nil
        subscriber = nil
        confirmed.removeAll()
        if up { logger.warning("redis link down", metadata: ["endpoint": "\(endpoint.host):\(endpoint.port)"]) }
        setUp(false)
        scheduleReconnect()
    }

    private func setUp(_ value: Bool) {
        guard up != value else { return }
        up = value
        upFlag.withLockedValue { $0 = value }
        onLinkChange?(value)
    }

    /// Exponential backoff with jitter: half to all of min(max, initial · 2^attempt).
    private func scheduleReconnect() {
        guard !stopped, reconnectTask == nil else { return }
        let base = min(options.maxBackoff.nanoseconds, options.initialBackoff.nanoseconds << min(attempt, 16))
        let delay = Int64.random(in: base / 2...max(base / 2, base))
        attempt += 1
        reconnectTask = eventLoop.scheduleTask(in: .nanoseconds(delay)) {
            self.reconnectTask = nil
            self.connect()
        }
    }
}
