import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import RelayCore
import RelayRedis
import RelayTestSupport
import XCTest

@testable import RelayServer
@testable import RelayBackends
@testable import RelayCluster

/// One suite, run against every `Broker`: the memory broker and the Redis broker (a real
/// redis-server). Subclasses say how to make one.
class BrokerConformanceTests: XCTestCase {
    var group: MultiThreadedEventLoopGroup!
    var loop: any EventLoop { group.next() }
    let wall = NIOLockedValueBox<Int64>(1_700_000_000_000)

    /// Makes a broker keeping `limits`; `nil` in the abstract base class (skips nothing: the base
    /// class has no tests of its own to run).
    func makeBroker(limits: HistoryLimits) throws -> (any Broker)? { nil }

    override func setUp() async throws {
        group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
    }

    override func tearDown() async throws {
        try await group.shutdownGracefully()
    }

    func publication(_ text: String) -> Publication {
        Publication(packet: ByteBuffer(string: "42[\"chat:say\",{\"t\":\"\(text)\"}]"))
    }

    /// What this node delivered: the packet's text, and its position when it got an offset.
    struct Delivered: Sendable {
        var text: String
        var position: StreamPosition?
    }

    /// The local delivery a `publish` waits for: through `deliver`, or (Redis, recoverable) back
    /// from the stream's channel.
    let pending = NIOLockedValueBox<EventLoopPromise<Delivered>?>(nil)

    /// Receives this broker's own deliveries from its channels.
    func listen(_ broker: any Broker) {
        let subscriber = TestSubscriber { [pending] stream, publication, offset, _ in
            let delivered = Delivered(text: String(buffer: publication.packet), position: offset.map { StreamPosition(stream: stream, offset: $0) })
            pending.withLockedValue { p in
                p?.succeed(delivered)
                p = nil
            }
        }
        broker.attach(subscriber)
        subscribers.append(subscriber)
    }

    /// The brokers hold their subscriber weakly: the test holds them.
    private var subscribers: [TestSubscriber] = []

    /// Publishes and waits for this node's delivery.
    func publish(_ broker: any Broker, _ text: String, to stream: StreamKey, recoverable: Bool = true) throws -> Delivered {
        broker.subscribe(stream)
        // Redis down: nothing to wait for (the publish degrades to this node).
        _ = try? broker.whenSubscribed(stream, on: loop).wait()
        let promise = loop.makePromise(of: Delivered.self)
        pending.withLockedValue { $0 = promise }
        let sent = publication(text)
        broker.publish(sent, to: stream, routing: Routing(), recoverable: recoverable) { [pending] offset in
            let delivered = Delivered(text: String(buffer: sent.packet), position: offset.map { StreamPosition(stream: stream, offset: $0) })
            pending.withLockedValue { p in
                p?.succeed(delivered)
                p = nil
            }
        }
        return try promise.futureResult.wait()
    }

    func texts(_ page: HistoryPage<Publication>) -> [String] {
        page.entries.map { String(buffer: $0.item.packet) }
    }

    func testRecoverableEventsGetIncreasingOffsetsAndAreKept() throws {
        guard let broker = try makeBroker(limits: HistoryLimits.testing(maxEvents: 50, maxAgeMs: 60_000, maxBytes: 1 << 20)) else { return }
        let room = StreamKey.room("conversation:\(UUID().uuidString)")
        XCTAssertEqual(try broker.head(of: room, on: loop).wait(), .zero)
        let delivered = try (0..<5).map { try publish(broker, "m\($0)", to: room) }
        let offsets = delivered.compactMap { $0.position?.offset }
        XCTAssertEqual(offsets.count, 5)
        XCTAssertEqual(offsets, offsets.sorted())
        XCTAssertEqual(Set(offsets).count, 5)
        XCTAssertEqual(delivered.first?.position?.stream, room)
        XCTAssertEqual(try broker.head(of: room, on: loop).wait(), offsets[4])
        // Limit 0 is the head only, whatever the offset (one never given included).
        let headOnly = try broker.history(of: room, after: StreamOffset(ms: 1, seq: 99), limit: 0, maxBytes: 0, on: loop).wait().get()
        XCTAssertEqual(headOnly.head, offsets[4])
        XCTAssertTrue(headOnly.entries.isEmpty)

        let all = try broker.history(of: room, after: .zero, limit: 100, maxBytes: 1 << 20, on: loop).wait().get()
        XCTAssertEqual(all.entries.map(\.offset), offsets)
        XCTAssertEqual(texts(all), delivered.map(\.text))
        XCTAssertFalse(all.more)
        let after = try broker.history(of: room, after: offsets[2], limit: 100, maxBytes: 1 << 20, on: loop).wait().get()
        XCTAssertEqual(after.entries.map(\.offset), Array(offsets[3...]))
        let page = try broker.history(of: room, after: offsets[0], limit: 2, maxBytes: 1 << 20, on: loop).wait().get()
        XCTAssertEqual(page.entries.map(\.offset), Array(offsets[1...2]))
        XCTAssertTrue(page.more)
        XCTAssertEqual(try broker.history(of: room, after: offsets[4], limit: 10, maxBytes: 1 << 20, on: loop).wait().get().entries.count, 0)
    }

    func testStreamsAreSeparate() throws {
        guard let broker = try makeBroker(limits: HistoryLimits.testing) else { return }
        let id = UUID().uuidString
        let a = StreamKey.room("a-\(id)"), user = StreamKey.user("u-\(id)")
        _ = try publish(broker, "to-a", to: a)
        let u = try publish(broker, "to-user", to: user)
        XCTAssertEqual(texts(try broker.history(of: user, after: .zero, limit: 10, maxBytes: 1 << 20, on: loop).wait().get()), [u.text])
        XCTAssertEqual(try broker.history(of: a, after: .zero, limit: 10, maxBytes: 1 << 20, on: loop).wait().get().entries.count, 1)
    }

    func testNonRecoverableEventsAreDeliveredButNotKept() throws {
        guard let broker = try makeBroker(limits: HistoryLimits.testing) else { return }
        let room = StreamKey.room("typing-\(UUID().uuidString)")
        let delivered = try publish(broker, "typing", to: room, recoverable: false)
        XCTAssertNil(delivered.position)
        XCTAssertEqual(try broker.head(of: room, on: loop).wait(), .zero)
    }

    func testAnOffsetTheHistoryNoLongerReachesIsUnavailable() throws {
        guard let broker = try makeBroker(limits: HistoryLimits.testing(maxEvents: 3, maxAgeMs: 60_000, maxBytes: 1 << 20)) else { return }
        let room = StreamKey.room("short-\(UUID().uuidString)")
        let offsets = try (0..<400).compactMap { try publish(broker, "m\($0)", to: room).position?.offset }
        let gone = try broker.history(of: room, after: offsets[0], limit: 10, maxBytes: 1 << 20, on: loop).wait()
        XCTAssertEqual(gone.map(\.entries.count), .failure(.unavailable))
        XCTAssertEqual(try broker.history(of: room, after: .zero, limit: 10, maxBytes: 1 << 20, on: loop).wait().map(\.entries.count), .failure(.unavailable))
        let recent = try broker.history(of: room, after: offsets[398], limit: 10, maxBytes: 1 << 20, on: loop).wait().get()
        XCTAssertEqual(recent.entries.map(\.offset), [offsets[399]])
        let unknown = StreamOffset(ms: offsets[399].ms, seq: offsets[399].seq + 1000)
        XCTAssertEqual(try broker.history(of: room, after: unknown, limit: 10, maxBytes: 1 << 20, on: loop).wait().map(\.entries.count), .failure(.unavailable))
    }
}

final class MemoryBrokerConformanceTests: BrokerConformanceTests {
    override func makeBroker(limits: HistoryLimits) throws -> (any Broker)? {
        MemoryBroker(limits: limits, wallMs: { [wall] in wall.withLockedValue { $0 += 1; return $0 } })
    }

    func testMemoryUsageIsBoundedByTheByteBudget() throws {
        let broker = MemoryBroker(limits: HistoryLimits.testing(maxEvents: 1000, maxAgeMs: 60_000, maxBytes: 16 * 4096), wallMs: { 1 })
        for i in 0..<5000 { _ = try publish(broker, String(repeating: "x", count: 100) + "\(i)", to: .room("r\(i % 50)")) }
        XCTAssertLessThanOrEqual(broker.memoryUsage.bytes, 16 * 4096)
        XCTAssertGreaterThan(broker.memoryUsage.events, 0)
    }
}

final class RedisBrokerConformanceTests: BrokerConformanceTests {
    var redis: RedisServerProcess?
    var buses: [ClusterBus] = []

    override func setUp() async throws {
        try await super.setUp()
        redis = try startedRedisServer()
    }

    override func tearDown() async throws {
        for bus in buses { await bus.stop() }
        buses = []
        redis?.kill()
        try await super.tearDown()
    }

    func makeBus(node: String) throws -> ClusterBus {
        let endpoint = try XCTUnwrap(RedisEndpoint(url: "redis://127.0.0.1:\(try XCTUnwrap(redis).port)"))
        let bus = ClusterBus(nodeID: node, redis: RedisClient(endpoint: endpoint, eventLoop: loop), options: .init(heartbeatMs: 2_000), metrics: RelayMetrics().cluster, logger: Logger(label: "test"))
        buses.append(bus)
        return bus
    }

    func waitUp(_ bus: ClusterBus) throws {
        let deadline = Date().addingTimeInterval(10)
        while !bus.isUp, Date() < deadline { usleep(10_000) }
        XCTAssertTrue(bus.isUp)
    }

    override func makeBroker(limits: HistoryLimits) throws -> (any Broker)? {
        let bus = try makeBus(node: "n\(buses.count)")
        let broker = RedisBroker(bus: bus, limits: limits, wallMs: { 1 })
        listen(broker)
        bus.start()
        try waitUp(bus)
        return broker
    }

    func testOtherNodesReceiveTheSameOffsets() throws {
        let a = try XCTUnwrap(try makeBroker(limits: HistoryLimits.testing))
        let b = try XCTUnwrap(try makeBroker(limits: HistoryLimits.testing))
        let room = StreamKey.room("cross-\(UUID().uuidString)")
        let received = NIOLockedValueBox<[Delivered]>([])
        let got = loop.makePromise(of: Void.self)
        let subscriber = TestSubscriber { stream, publication, offset, _ in
            guard stream == room else { return }
            let delivered = Delivered(text: String(buffer: publication.packet), position: offset.map { StreamPosition(stream: stream, offset: $0) })
            if received.withLockedValue({ $0.append(delivered); return $0.count }) == 3 { got.succeed(()) }
        }
        b.attach(subscriber)
        defer { withExtendedLifetime(subscriber) {} }
        b.subscribe(room)
        // The subscription is in place once a publish reaches b (bounded retries).
        var published: [Delivered] = []
        for i in 0..<3 {
            usleep(i == 0 ? 200_000 : 0)
            published.append(try publish(a, "x\(i)", to: room))
        }
        try got.futureResult.wait()
        XCTAssertEqual(received.withLockedValue { $0.map(\.position) }, published.map(\.position))
        XCTAssertEqual(received.withLockedValue { $0.map(\.text) }, published.map(\.text))
    }

    func testRedisDownMeansNotRecoveredNeverWrongData() throws {
        let broker = try XCTUnwrap(try makeBroker(limits: HistoryLimits.testing))
        let room = StreamKey.room("down-\(UUID().uuidString)")
        let before = try XCTUnwrap(try publish(broker, "before", to: room).position?.offset)
        redis?.kill()
        let deadline = Date().addingTimeInterval(10)
        while (broker as? any ControlChannel)?.reachesOtherNodes == true, Date() < deadline { usleep(10_000) }
        let during = try publish(broker, "during", to: room)
        XCTAssertNil(during.position, "delivered on this node, without an offset")
        XCTAssertEqual(try broker.history(of: room, after: before, limit: 10, maxBytes: 1 << 20, on: loop).wait().map(\.entries.count), .failure(.storeDown))
    }
}

final class MemoryBrokerExpiryTests: XCTestCase {
    func testQuietStreamsExpireWithoutNewAppends() {
        let now = NIOLockedValueBox<Int64>(1_000)
        let broker = MemoryBroker(limits: HistoryLimits.testing(maxEvents: 10, maxAgeMs: 1_000, maxBytes: 1 << 20), wallMs: { now.withLockedValue { $0 } })
        for i in 0..<5 {
            broker.publish(Publication(packet: ByteBuffer(string: "42[\"a:b\",{\"n\":\(i)}]")), to: .room("quiet\(i)"), routing: Routing(), recoverable: true) { _ in }
        }
        XCTAssertEqual(broker.memoryUsage.events, 5)
        now.withLockedValue { $0 += 1_001 }
        broker.trimExpired()
        XCTAssertEqual(broker.memoryUsage.events, 0)
        XCTAssertEqual(broker.memoryUsage.bytes, 0)
    }
}

/// A broker subscriber that calls a closure (the tests' view of what a node receives).
final class TestSubscriber: BrokerSubscriber {
    let onReceive: @Sendable (StreamKey, Publication, StreamOffset?, Routing) -> Void

    init(_ onReceive: @escaping @Sendable (StreamKey, Publication, StreamOffset?, Routing) -> Void) { self.onReceive = onReceive }

    func received(_ publication: Publication, on stream: StreamKey, offset: StreamOffset?, routing: Routing) {
        onReceive(stream, publication, offset, routing)
    }
}
