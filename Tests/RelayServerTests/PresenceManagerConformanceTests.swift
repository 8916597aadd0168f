import Logging
import NIOCore
import NIOPosix
import RelayCore
import RelayRedis
import RelayTestSupport
import XCTest

@testable import RelayServer
@testable import RelayBackends
@testable import RelayCluster

/// One suite, run against every `PresenceManager`: on a single node the memory manager and the
/// Redis manager must give the same answers (first device in, last device out, the room's list).
class PresenceManagerConformanceTests: XCTestCase {
    var group: MultiThreadedEventLoopGroup!
    var loop: any EventLoop { group.next() }

    func makeManager() throws -> (any PresenceManager)? { nil }

    override func setUp() async throws { group = MultiThreadedEventLoopGroup(numberOfThreads: 1) }
    override func tearDown() async throws { try await group.shutdownGracefully() }

    func testFirstInLastOutAndTheRoomsList() throws {
        guard let manager = try makeManager() else { return }
        let room = "conversation:\(UUID().uuidString)"
        let alice = [PresenceEntry(user: "alice", devices: 1)]
        let join = try manager.update(room: room, user: "alice", local: PresenceUpdate(before: 0, after: 1, presence: alice), on: loop).wait()
        XCTAssertTrue(join.becamePresent)
        XCTAssertEqual(join.presence, alice)
        let second = try manager.update(
            room: room, user: "alice", local: PresenceUpdate(before: 1, after: 2, presence: [PresenceEntry(user: "alice", devices: 2)]), on: loop
        ).wait()
        XCTAssertFalse(second.becamePresent, "a second device is no news")
        XCTAssertEqual(try manager.presence(room: room, local: [PresenceEntry(user: "alice", devices: 2)], on: loop).wait(), [PresenceEntry(user: "alice", devices: 2)])
        let one = try manager.update(room: room, user: "alice", local: PresenceUpdate(before: 2, after: 1, presence: []), on: loop).wait()
        XCTAssertFalse(one.leftPresence)
        let gone = try manager.update(room: room, user: "alice", local: PresenceUpdate(before: 1, after: 0, presence: []), on: loop).wait()
        XCTAssertTrue(gone.leftPresence, "the last device out")
        XCTAssertEqual(try manager.presence(room: room, local: [], on: loop).wait(), [])
    }
}

final class MemoryPresenceManagerConformanceTests: PresenceManagerConformanceTests {
    override func makeManager() throws -> (any PresenceManager)? { MemoryPresenceManager() }

    func testThisNodesViewIsTheAnswer() throws {
        let local = [PresenceEntry(user: "bob", devices: 3)]
        XCTAssertEqual(try MemoryPresenceManager().presence(room: "r", local: local, on: loop).wait(), local)
    }
}

final class RedisPresenceManagerConformanceTests: PresenceManagerConformanceTests {
    var redis: RedisServerProcess?
    var bus: ClusterBus?

    override func setUp() async throws {
        try await super.setUp()
        redis = try startedRedisServer()
    }

    override func tearDown() async throws {
        if let bus { await bus.stop() }
        redis?.kill()
        try await super.tearDown()
    }

    override func makeManager() throws -> (any PresenceManager)? {
        let endpoint = try XCTUnwrap(RedisEndpoint(url: "redis://127.0.0.1:\(try XCTUnwrap(redis).port)"))
        let bus = ClusterBus(nodeID: "n1", redis: RedisClient(endpoint: endpoint, eventLoop: loop), options: .init(heartbeatMs: 2_000), metrics: RelayMetrics().cluster, logger: Logger(label: "test"))
        self.bus = bus
        bus.start()
        let deadline = Date().addingTimeInterval(10)
        while !bus.isUp, Date() < deadline { usleep(10_000) }
        XCTAssertTrue(bus.isUp)
        return RedisPresenceManager(bus: bus)
    }

    func testTheClusterNotThisNodesListIsTheAnswer() throws {
        let manager = try XCTUnwrap(try makeManager())
        // Redis knows of nobody in this room: a stale local list is not believed while Redis is up.
        XCTAssertEqual(try manager.presence(room: "conversation:\(UUID().uuidString)", local: [PresenceEntry(user: "ghost", devices: 1)], on: loop).wait(), [])
    }
}
