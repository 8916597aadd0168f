import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import RelayLocks

/// A small Redis client on SwiftNIO, written by hand because no Swift Redis client is reachable
/// here. It talks to one Redis, to a Redis Cluster, or to the master Redis Sentinel names:
///
/// - one `RedisNodeLink` (a pipelined command connection, RESP3 when the server speaks it, and a
///   subscriber connection) per master it routes to;
/// - in a cluster, each command goes to the master of its key's slot (`RedisSlotMap`, from
///   `CLUSTER SLOTS`); `MOVED` updates the map and retries there, `ASK` retries once with
///   `ASKING`, `TRYAGAIN`/`CLUSTERDOWN` retry shortly; each sharded subscription is made on the
///   master that owns its channel's slot and made again wherever the slot moves;
/// - with Sentinel, the master's address is asked of the sentinels whenever the link is lost
///   (and when the master answers `READONLY`: it was demoted);
/// - links are re-established with exponential backoff and jitter, the slot map re-read, and
///   every subscription restored.
///
/// The client is up when every slot has a master whose link is up. All state lives on one event
/// loop; the public methods may be called from any thread. (`@unchecked Sendable`: the mutable
/// state is only touched on `eventLoop`; public methods hop there with `execute` or a future.)
public final class RedisClient: @unchecked Sendable {
    public struct Options: Sendable {
        public var connectTimeout: TimeAmount = .seconds(2)
        public var initialBackoff: TimeAmount = .milliseconds(100)
        public var maxBackoff: TimeAmount = .seconds(5)
        /// The longest wait between two looks for a failed-over master (cluster, Sentinel).
        public var failoverBackoff: TimeAmount = .seconds(1)
        public var commandTimeout: TimeAmount = .seconds(5)
        /// How often a cluster's slot map is read again when nothing forced it.
        public var slotMapRefresh: TimeAmount = .seconds(15)
        public init() {}
    }

    /// What the client found at the endpoint.
    public enum Topology: String, Sendable {
        case unknown, single, cluster, sentinel
    }

    public let endpoint: RedisEndpoint
    public let eventLoop: any EventLoop
    let options: Options
    let logger: Logger

    /// Whom the client tells of messages and of going up or down.
    private struct Handlers {
        let onMessage: @Sendable (String, ByteBuffer) -> Void
        let onLinkChange: @Sendable (Bool) -> Void
    }

    // Loop-confined state.
    private var links: [RedisEndpoint.Address: RedisNodeLink] = [:]
    /// Links being made: a second caller waits for the same one.
    private var connecting: [RedisEndpoint.Address: EventLoopFuture<RedisNodeLink>] = [:]
    private var masters = RedisMasters()
    private var up = false
    private var refreshes = RedisRefreshSchedule()
    private var subscriptions = RedisSubscriptions()
    private var handlers: Handlers?
    /// `up` and the topology, for readers on any thread.
    private let published = AuditedLock((up: false, topology: Topology.unknown))

    public init(endpoint: RedisEndpoint, eventLoop: any EventLoop, options: Options = Options(), logger: Logger = Logger(label: "relay.redis")) {
        self.endpoint = endpoint
        self.eventLoop = eventLoop
        self.options = options
        self.logger = logger
    }

    /// Whether every slot's master is reachable (readable from any thread).
    public var isUp: Bool { published.withLockedValue { $0.up } }
    /// One Redis, a cluster or a Sentinel-named master (readable from any thread).
    public var currentTopology: Topology { published.withLockedValue { $0.topology } }

    /// Starts connecting; `onMessage` gets every pub/sub message, `onLinkChange` every up/down.
    public func start(onMessage: @escaping @Sendable (String, ByteBuffer) -> Void, onLinkChange: @escaping @Sendable (Bool) -> Void) {
        eventLoop.execute {
            self.handlers = Handlers(onMessage: onMessage, onLinkChange: onLinkChange)
            self.refresh()
            let periodic = self.eventLoop.scheduleRepeatedTask(initialDelay: self.options.slotMapRefresh, delay: self.options.slotMapRefresh) { _ in
                if self.masters.topology == .cluster { self.refresh() }
            }
            self.refreshes.repeatEvery(periodic)
        }
    }

    public func stop() async {
        try? await eventLoop.submit {
            self.refreshes.stop()
            for link in self.links.values { link.close() }
            self.links.removeAll()
        }.get()
    }

    // MARK: Commands

    /// Sends one command to the master of its key's slot; fails at once with `.unavailable`
    /// while that master cannot be reached.
    public func send(_ args: [String]) -> EventLoopFuture<RESPValue> {
        var bytes = ByteBufferAllocator().buffer(capacity: 64)
        RESPParser.encodeCommand(args, into: &bytes)
        return send(bytes, slot: RedisCommandKey.slot(of: args))
    }

    func send(_ bytes: ByteBuffer, slot: Int?) -> EventLoopFuture<RESPValue> {
        eventLoop.flatSubmit {
            let promise = self.eventLoop.makePromise(of: RESPValue.self)
            let attempt = Attempt()
            let timeout = self.eventLoop.scheduleTask(in: self.options.commandTimeout) {
                promise.fail(RESPError.unavailable)
                self.stalled(attempt.link)
            }
            promise.futureResult.whenComplete { _ in timeout.cancel() }
            self.dispatch(bytes, slot: slot, to: nil, asking: false, tries: 0, attempt: attempt, promise: promise)
            return promise.futureResult
        }
    }

    /// The link a command was last written to (loop-confined, like the client).
    private final class Attempt: @unchecked Sendable {
        var link: RedisNodeLink?
    }

    /// No answer within the command timeout: the path to that server is dead even if TCP has
    /// not said so (a partition that drops packets, a frozen server). Drop the link, so the
    /// client looks for the master again and everything is restated when it is back.
    private func stalled(_ link: RedisNodeLink?) {
        guard let link, link.isUp, links[link.address] === link else { return }
        logger.warning("redis command timed out: closing the link", metadata: ["endpoint": "\(link.address)"])
        link.close()
        linkClosed(link)
    }

    /// Sends one command whose last argument is raw bytes; `args` is given whether sharded pub/sub
    /// is in use (a script that publishes picks `SPUBLISH` or `PUBLISH`).
    public func send(_ args: @escaping @Sendable (_ shardedPubSub: Bool) -> [String], payload: ByteBuffer) -> EventLoopFuture<RESPValue> {
        eventLoop.flatSubmit {
            let list = args(self.shardedPubSub)
            var bytes = ByteBufferAllocator().buffer(capacity: payload.readableBytes + 256)
            RESPParser.encodeCommand(list, payload: payload, into: &bytes)
            return self.send(bytes, slot: RedisCommandKey.slot(of: list))
        }
    }

    /// Publishes raw bytes (SPUBLISH when sharded pub/sub is available). The future tells how
    /// many subscribers got it, or fails while the link is down.
    @discardableResult
    public func publish(_ channel: String, _ payload: ByteBuffer) -> EventLoopFuture<RESPValue> {
        eventLoop.flatSubmit {
            var bytes = ByteBufferAllocator().buffer(capacity: payload.readableBytes + channel.utf8.count + 32)
            RESPParser.encodeCommand([self.shardedPubSub ? "SPUBLISH" : "PUBLISH", channel], payload: payload, into: &bytes)
            return self.send(bytes, slot: RedisHashSlot.slot(of: channel))
        }
    }

    /// At most this many redirects and retries of one command (its timeout bounds them too).
    private static let maxTries = 8

    private func dispatch(
        _ bytes: ByteBuffer, slot: Int?, to target: RedisEndpoint.Address?, asking: Bool, tries: Int, attempt: Attempt, promise: EventLoopPromise<RESPValue>
    ) {
        guard let address = target ?? route(slot), let link = links[address], link.isUp else {
            promise.fail(RESPError.unavailable)
            return
        }
        attempt.link = link
        link.send(bytes, asking: asking).whenComplete { result in
            attempt.link = nil
            switch result {
            case .success(let value):
                promise.succeed(value)
            case .failure(RESPError.server(let message)) where tries < Self.maxTries:
                self.redirected(message, bytes: bytes, slot: slot, from: address, tries: tries, attempt: attempt, promise: promise)
            case .failure(let error):
                promise.fail(error)
            }
        }
    }

    /// The master a command for `slot` goes to (any master for keyless commands).
    private func route(_ slot: Int?) -> RedisEndpoint.Address? {
        if let slot { return masters.slotMap.owner(of: slot) }
        return masters.slotMap.masters.first { links[$0]?.isUp == true }
    }

    private func redirected(
        _ message: String, bytes: ByteBuffer, slot: Int?, from: RedisEndpoint.Address, tries: Int, attempt: Attempt, promise: EventLoopPromise<RESPValue>
    ) {
        if let redirect = RedisRedirect(error: message) {
            switch redirect {
            case .moved(let movedSlot, let address):
                masters.slotMap.move(slot: movedSlot, to: address)
                scheduleRefresh(after: .zero)
                withLink(to: address) { self.dispatch(bytes, slot: slot, to: address, asking: false, tries: tries + 1, attempt: attempt, promise: promise) }
            case .ask(_, let address):
                withLink(to: address) { self.dispatch(bytes, slot: slot, to: address, asking: true, tries: tries + 1, attempt: attempt, promise: promise) }
            }
            return
        }
        guard RedisRedirect.isTransient(message) else {
            promise.fail(RESPError.server(message))
            return
        }
        // A demoted master (Sentinel failover) or a cluster that is failing over: look again
        // for the master, and try once it may be there.
        if message.hasPrefix("READONLY"), masters.topology != .cluster, let link = links[from] {
            link.close()
            linkClosed(link)
        } else {
            scheduleRefresh(after: .milliseconds(50))
        }
        eventLoop.scheduleTask(in: .milliseconds(Int64(50 << min(tries, 4)))) {
            self.dispatch(bytes, slot: slot, to: nil, asking: false, tries: tries + 1, attempt: attempt, promise: promise)
        }
    }

    /// Runs `body` once a link to `address` is up (connecting one if needed).
    private func withLink(to address: RedisEndpoint.Address, _ body: @escaping @Sendable () -> Void) {
        if links[address]?.isUp == true {
            body()
            return
        }
        connectLink(address).whenComplete { _ in body() }
    }

    // MARK: Subscriptions

    /// Adds channels to the subscriptions (kept across reconnects and topology changes).
    public func subscribe(_ names: [String]) {
        eventLoop.execute {
            let new = self.subscriptions.add(names)
            if !new.isEmpty { self.placeSubscriptions(new) }
        }
    }

    /// Completes once the server confirmed the subscription to `name` on the current link (at
    /// once if it already did); fails after the command timeout.
    public func subscribed(_ name: String) -> EventLoopFuture<Void> {
        eventLoop.flatSubmit {
            if self.subscriptions.isConfirmed(name) { return self.eventLoop.makeSucceededVoidFuture() }
            let promise = self.eventLoop.makePromise(of: Void.self)
            self.subscriptions.wait(for: name, promise)
            let timeout = self.eventLoop.scheduleTask(in: self.options.commandTimeout) { promise.fail(RESPError.unavailable) }
            promise.futureResult.whenComplete { _ in timeout.cancel() }
            return promise.futureResult
        }
    }

    public func unsubscribe(_ names: [String]) {
        eventLoop.execute {
            for (address, gone) in self.subscriptions.remove(names) {
                for group in RedisSubscriptions.commandGroups(gone, bySlot: self.subscriptionsBySlot) { self.links[address]?.writeSubscriber([self.shardedPubSub ? "SUNSUBSCRIBE" : "UNSUBSCRIBE"] + group) }
            }
        }
    }

    /// Subscribes `names` on the masters that own their slots now, moving any that were
    /// subscribed elsewhere.
    private func placeSubscriptions(_ names: [String]) {
        guard up else { return }
        let plan = subscriptions.place(names) { name in
            guard let owner = masters.slotMap.owner(of: RedisHashSlot.slot(of: name)), links[owner]?.isUp == true else { return nil }
            return owner
        }
        let (subscribe, unsubscribe) = shardedPubSub ? ("SSUBSCRIBE", "SUNSUBSCRIBE") : ("SUBSCRIBE", "UNSUBSCRIBE")
        let bySlot = subscriptionsBySlot
        for (address, gone) in plan.unsubscribe where links[address]?.isUp == true {
            for group in RedisSubscriptions.commandGroups(gone, bySlot: bySlot) { links[address]?.writeSubscriber([unsubscribe] + group) }
        }
        for (address, new) in plan.subscribe {
            for group in RedisSubscriptions.commandGroups(new, bySlot: bySlot) { links[address]?.writeSubscriber([subscribe] + group) }
        }
    }

    private func handleSubscriberMessage(_ value: RESPValue, from address: RedisEndpoint.Address) {
        guard let items = value.elements, items.count >= 3, let kind = items[0].string else { return }
        switch kind.lowercased() {
        case "message", "smessage":
            if let channel = items[1].string, case .bulkString(let payload) = items[2] { handlers?.onMessage(channel, payload) }
        case "subscribe", "ssubscribe":
            guard let channel = items[1].string else { return }
            for waiter in subscriptions.confirm(channel, on: address) { waiter.succeed(()) }
        case "unsubscribe", "sunsubscribe":
            // Not asked for: the channel's slot moved to another master. Find out where.
            guard let channel = items[1].string, subscriptions.dropped(channel, on: address) else { return }
            scheduleRefresh(after: .zero)
        default:
            break
        }
    }

    /// Whether the server has sharded pub/sub (Redis ≥ 7), as detected at connect.
    public var usesShardedPubSub: EventLoopFuture<Bool> { eventLoop.submit { self.shardedPubSub } }
    public var respVersion: EventLoopFuture<Int> { eventLoop.submit { self.anyLink?.protocolVersion ?? 2 } }

    private var anyLink: RedisNodeLink? { masters.slotMap.masters.lazy.compactMap { self.links[$0] }.first { $0.isUp } }
    private var shardedPubSub: Bool { anyLink?.shardedPubSub ?? false }
    /// Channels go in groups of one slot each to one (S)SUBSCRIBE: sharded pub/sub in a cluster.
    private var subscriptionsBySlot: Bool { masters.topology == .cluster && shardedPubSub }

    // MARK: Topology

    /// A live link to `address`: the one there is, the one being made, or a new one.
    private func connectLink(_ address: RedisEndpoint.Address) -> EventLoopFuture<RedisNodeLink> {
        if let link = links[address], link.isUp { return eventLoop.makeSucceededFuture(link) }
        if let pending = connecting[address] { return pending }
        links[address]?.close()
        let link = RedisNodeLink(address: address, eventLoop: eventLoop)
        links[address] = link
        let future = link.connect(
            password: endpoint.password, database: masters.topology == .cluster ? 0 : endpoint.database, timeout: options.connectTimeout,
            onPush: { [weak self] value in self?.handleSubscriberMessage(value, from: address) },
            onClosed: { [weak self] link in self?.linkClosed(link) }
        ).map { link }.flatMapErrorThrowing { error in
            if self.links[address] === link { self.links.removeValue(forKey: address) }
            throw error
        }
        connecting[address] = future
        future.whenComplete { _ in self.connecting.removeValue(forKey: address) }
        return future
    }

    private func linkClosed(_ link: RedisNodeLink) {
        guard links[link.address] === link else { return }
        links.removeValue(forKey: link.address)
        subscriptions.forget(link.address)
        if masters.slotMap.masters.contains(link.address) {
            masters.confirmed = false
            logger.warning("redis link down", metadata: ["endpoint": "\(link.address)"])
            evaluate()
            scheduleRefresh(after: .zero)
        }
    }

    /// Finds the masters (asking the sentinels, or a cluster node for its slot map), links to
    /// each, and places the subscriptions; retried with backoff until every slot is served.
    private func refresh() {
        guard !refreshes.stopped else { return }
        guard !refreshes.running else {
            refreshes.again = true
            return
        }
        refreshes.running = true
        discover().flatMap { map, topology -> EventLoopFuture<Void> in
            self.masters.topology = topology
            self.adopt(map)
            let missing = map.masters.filter { self.links[$0]?.isUp != true }
            let connects = missing.map { self.connectLink($0).map { _ in () }.recover { _ in () } }
            return EventLoopFuture.andAllComplete(connects, on: self.eventLoop)
        }.whenComplete { result in
            self.refreshes.running = false
            switch result {
            case .success: self.masters.confirmed = true
            case .failure(let error):
                self.masters.confirmed = false
                self.logger.debug("redis topology not found", metadata: ["error": "\(error)"])
            }
            self.evaluate()
            if self.up { self.placeSubscriptions(Array(self.subscriptions.channels)) }
            if self.refreshes.again {
                self.refreshes.again = false
                self.scheduleRefresh(after: .zero)
            } else if !self.up {
                self.scheduleRefresh(after: self.backoff())
            }
        }
    }

    private func scheduleRefresh(after delay: TimeAmount) {
        guard refreshes.maySchedule else { return }
        let task = eventLoop.scheduleTask(in: delay) {
            self.refreshes.scheduledStarted()
            self.refresh()
        }
        refreshes.schedule(task)
    }

    /// The wait before the next look. Looking for a failed-over master waits at most
    /// `failoverBackoff`.
    private func backoff() -> TimeAmount {
        refreshes.backoff(initial: options.initialBackoff, cap: masters.topology == .single ? options.maxBackoff : options.failoverBackoff)
    }

    private func adopt(_ map: RedisSlotMap) {
        masters.slotMap = map
        // Links to nodes that are no longer masters carry nothing: close them.
        for (address, link) in links where !map.masters.contains(address) {
            links.removeValue(forKey: address)
            link.close()
            subscriptions.forget(address)
        }
    }

    /// Up when every slot has a master with a live link.
    private func evaluate() {
        let map = masters.slotMap
        let now = masters.confirmed && map.coversEverySlot && map.masters.allSatisfy { links[$0]?.isUp == true }
        let topology = masters.topology
        published.withLockedValue { $0 = (now, topology) }
        guard now != up else { return }
        up = now
        if now {
            refreshes.succeeded()
            logger.info("redis link up", metadata: [
                "topology": "\(topology.rawValue)", "masters": "\(map.masters.map(\.description).joined(separator: ","))",
                "resp": "\(anyLink?.protocolVersion ?? 2)", "sharded": "\(shardedPubSub)",
            ])
        } else {
            logger.warning("redis down", metadata: ["topology": "\(topology.rawValue)"])
        }
        handlers?.onLinkChange(now)
    }

    /// The current masters: from the sentinels, from a cluster node, or the one Redis (known
    /// masters first, then the seeds, then every node the last map named).
    private func discover() -> EventLoopFuture<(RedisSlotMap, Topology)> {
        let probe = RedisTopologyProbe(
            endpoint: endpoint, eventLoop: eventLoop, options: options,
            connect: { address in self.connectLink(address) }, stalled: { link in self.stalled(link) })
        return probe.discover(known: masters.slotMap.masters.filter { links[$0]?.isUp == true }, lastNodes: masters.slotMap.nodes)
    }
}
