import Foundation
import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOEmbedded
import NIOPosix
import RelayCore
import RelayRedis
import RelayTestSupport
import XCTest

@testable import RelayServer
@testable import RelayBackends
@testable import RelayCluster

/// The backend answers on one node: emit recipients (per user, `to.users`), the presence
/// queries, and coalesced emits (the hub's timers on an embedded loop, time moved by hand).
final class ClusterAnswersTests: XCTestCase {
    let loopA = EmbeddedEventLoop()
    let loopB = EmbeddedEventLoop()
    let clock = ManualClock()
    lazy var hub: Hub = {
        let c = RelayConfiguration(jwt: .hs256(secret: String(repeating: "s", count: 32)), apiKey: "a", adminKey: "b")
        return Hub(eventLoops: [loopA, loopB], configuration: c, clock: clock.relayClock)
    }()
    var shardA: LoopPartition { hub.partitions[0] }
    var shardB: LoopPartition { hub.partitions[1] }

    func connect(_ sink: RecordingSink, user: String, on shard: LoopPartition) throws {
        try hub.membership.register(sink, sid: "sid-\(sink.connectionID)", user: user, on: shard)
    }

    func advance(ms: Int64) {
        clock.advance(ms: ms)
        loopA.advanceTime(by: .milliseconds(ms))
        loopB.run()
    }

    func emit(_ body: String) throws -> (UInt, JSONValue) {
        let response = try now(EmitEndpoint(hub: hub).handle(Array(body.utf8), on: loopA))
        loopA.run()
        loopB.run()
        return (response.status.code, try JSONParser.parse(response.body))
    }

    func json(_ text: String) throws -> JSONValue { try JSONParser.parse(Array(text.utf8)) }

    func code(_ answer: (UInt, JSONValue)) -> String? { answer.1["error"]?["code"]?.stringValue }

    // MARK: Emit

    func testEmitToAUserCountsItsSocketsAndPerUserWhenAsked() throws {
        let bob1 = RecordingSink(1), bob2 = RecordingSink(2)
        try connect(bob1, user: "bob", on: shardA)
        try connect(bob2, user: "bob", on: shardB)
        XCTAssertEqual(try emit(#"{"event":"notification:new","to":{"user":"bob"},"data":{"n":1}}"#).1, try json(#"{"recipients":2}"#))
        XCTAssertEqual(
            try emit(#"{"event":"notification:new","to":{"user":"bob"},"recipientsByUser":true}"#).1, try json(#"{"recipients":2,"users":{"bob":2}}"#))
        XCTAssertEqual(bob1.received.count, 2)
        XCTAssertEqual(bob2.received.count, 2)
    }

    func testEmitToUsersReachesEachOnceAndCountsDuplicatesOnce() throws {
        let bob1 = RecordingSink(1), bob2 = RecordingSink(2), carol = RecordingSink(3), dave = RecordingSink(4)
        try connect(bob1, user: "bob", on: shardA)
        try connect(bob2, user: "bob", on: shardB)
        try connect(carol, user: "carol", on: shardB)
        try connect(dave, user: "dave", on: shardA)
        let answer = try emit(#"{"event":"group:update","to":{"users":["bob","carol","bob","erin"]},"recipientsByUser":true,"data":{"g":1}}"#)
        XCTAssertEqual(answer.0, 200)
        XCTAssertEqual(answer.1, try json(#"{"recipients":3,"users":{"bob":2,"carol":1,"erin":0}}"#))
        XCTAssertEqual(bob1.received.count, 1, "a duplicate user gets it once")
        XCTAssertEqual(bob2.received.count, 1)
        XCTAssertEqual(carol.received.count, 1)
        XCTAssertEqual(dave.received, [])
        XCTAssertEqual(try emit(#"{"event":"group:update","to":{"users":[]}}"#).1, try json(#"{"recipients":0}"#))
    }

    func testEmitToARoomCountsItsDevicesAndUsers() throws {
        let alice = RecordingSink(1), bob1 = RecordingSink(2), bob2 = RecordingSink(3)
        try connect(alice, user: "alice", on: shardA)
        try connect(bob1, user: "bob", on: shardA)
        try connect(bob2, user: "bob", on: shardB)
        for (sink, user, shard) in [(alice, "alice", shardA), (bob1, "bob", shardA), (bob2, "bob", shardB)] {
            _ = try now(hub.membership.join(room: "conversation:1", sink: sink, user: user, on: shard))
        }
        XCTAssertEqual(try emit(#"{"event":"message:new","to":{"room":"conversation:1"}}"#).1, try json(#"{"recipients":3}"#))
        XCTAssertEqual(
            try emit(#"{"event":"message:new","to":{"room":"conversation:1"},"recipientsByUser":true}"#).1,
            try json(#"{"recipients":3,"users":{"alice":1,"bob":2}}"#))
        XCTAssertEqual(try emit(#"{"event":"message:new","to":{"room":"conversation:empty"}}"#).1, try json(#"{"recipients":0}"#))
    }

    func testEmitRefusesBadTargetsAndCoalesceRules() throws {
        let users = (0...1000).map { "\"u\($0)\"" }.joined(separator: ",")
        let bad = [
            #"{"event":"a:b","to":{"user":"bob","room":"conversation:1"}}"#,
            #"{"event":"a:b","to":{"users":"bob"}}"#,
            #"{"event":"a:b","to":{"users":["bob",5]}}"#,
            #"{"event":"a:b","to":{"users":[""]}}"#,
            "{\"event\":\"a:b\",\"to\":{\"users\":[\"cafe\u{301}\"]}}",
            "{\"event\":\"a:b\",\"to\":{\"users\":[\(users)]}}",
            #"{"event":"a:b","to":{"user":"bob"},"recipientsByUser":"yes"}"#,
            #"{"event":"a:b","to":{"user":"bob"},"coalesce":{"key":"k","windowMs":9}}"#,
            #"{"event":"a:b","to":{"user":"bob"},"coalesce":{"key":"k","windowMs":60001}}"#,
            #"{"event":"a:b","to":{"user":"bob"},"coalesce":{"key":"","windowMs":500}}"#,
            "{\"event\":\"a:b\",\"to\":{\"user\":\"bob\"},\"coalesce\":{\"key\":\"\(String(repeating: "k", count: 129))\",\"windowMs\":500}}",
            #"{"event":"a:b","to":{"user":"bob"},"coalesce":{"windowMs":500}}"#,
            #"{"event":"a:b","to":{"user":"bob"},"coalesce":"k"}"#,
        ]
        for body in bad {
            let answer = try emit(body)
            XCTAssertEqual(answer.0, 400, body)
            XCTAssertEqual(code(answer), "invalid_payload", body)
        }
        let limit = (0..<1000).map { "\"u\($0)\"" }.joined(separator: ",")
        XCTAssertEqual(try emit("{\"event\":\"a:b\",\"to\":{\"users\":[\(limit)]}}").0, 200, "1000 users are accepted")
        XCTAssertEqual(
            try emit("{\"event\":\"a:b\",\"to\":{\"user\":\"bob\"},\"coalesce\":{\"key\":\"\(String(repeating: "k", count: 128))\",\"windowMs\":10}}").0, 200)
    }

    // MARK: Presence

    func testUserPresenceHasDevicesRoomsAndLastSeen() throws {
        let bob1 = RecordingSink(1), bob2 = RecordingSink(2)
        try connect(bob1, user: "bob", on: shardA)
        try connect(bob2, user: "bob", on: shardB)
        _ = try now(hub.membership.join(room: "conversation:2", sink: bob1, user: "bob", on: shardA))
        _ = try now(hub.membership.join(room: "conversation:1", sink: bob2, user: "bob", on: shardB))
        let endpoint = PresenceEndpoint(presence: hub.presence)
        func single(_ segment: String) throws -> (UInt, JSONValue) {
            let r = try now(endpoint.user(segment: Substring(segment), on: loopA))
            return (r.status.code, try JSONParser.parse(r.body))
        }
        XCTAssertEqual(
            try single("bob").1,
            try json(#"{"user":"bob","online":true,"devices":2,"rooms":["conversation:1","conversation:2"],"lastSeen":null}"#))
        clock.advance(ms: 5)
        hub.membership.unregister(bob1.connectionID, sid: "sid-1", user: "bob", on: shardA)
        let seen = clock.relayClock.wallMs()
        XCTAssertEqual(
            try single("bob").1, try json(#"{"user":"bob","online":true,"devices":1,"rooms":["conversation:1"],"lastSeen":\#(seen)}"#))
        clock.advance(ms: 5)
        hub.membership.unregister(bob2.connectionID, sid: "sid-2", user: "bob", on: shardB)
        let last = clock.relayClock.wallMs()
        XCTAssertEqual(try single("bob").1, try json(#"{"user":"bob","online":false,"devices":0,"rooms":[],"lastSeen":\#(last)}"#))
        XCTAssertEqual(try single("nobody").1, try json(#"{"user":"nobody","online":false,"devices":0,"rooms":[],"lastSeen":null}"#))
        XCTAssertEqual(try single("caf%C3%A9").1["user"], "caf\u{E9}", "percent-decoded")
        XCTAssertEqual(try single("a+b").1["user"], "a+b", "a plus stays a plus in a path")
        XCTAssertEqual(try single("cafe%CC%81").0, 400, "not NFC")
        XCTAssertEqual(try single("%ZZ").0, 400)
        XCTAssertEqual(try single("%FF").0, 400)
    }

    func testBatchPresence() throws {
        let bob = RecordingSink(1), carol = RecordingSink(2)
        try connect(bob, user: "bob", on: shardA)
        try connect(carol, user: "carol", on: shardB)
        hub.membership.unregister(carol.connectionID, sid: "sid-2", user: "carol", on: shardB)
        let seen = clock.relayClock.wallMs()
        let endpoint = PresenceEndpoint(presence: hub.presence)
        func batch(_ body: String) throws -> (UInt, JSONValue) {
            let r = try now(endpoint.batch(Array(body.utf8), on: loopA))
            return (r.status.code, try JSONParser.parse(r.body))
        }
        XCTAssertEqual(
            try batch(#"{"users":["bob","carol","dan","bob"]}"#).1,
            try json(
                #"{"users":{"bob":{"online":true,"devices":1,"lastSeen":null},"carol":{"online":false,"devices":0,"lastSeen":\#(seen)},"dan":{"online":false,"devices":0,"lastSeen":null}}}"#
            ))
        let many = (0...1000).map { "\"u\($0)\"" }.joined(separator: ",")
        for body in [#"{"users":[]}"#, #"{"users":"bob"}"#, #"{}"#, #"{"users":[1]}"#, "{\"users\":[\(many)]}"] {
            let answer = try batch(body)
            XCTAssertEqual(answer.0, 400, body)
            XCTAssertEqual(code(answer), "invalid_payload", body)
        }
        XCTAssertEqual(code(try batch("{nope")), "invalid_json")
    }

    func testPresencePathsAreMatchedExactly() {
        XCTAssertEqual(PresenceEndpoint.userSegment(of: "/api/v1/users/bob/presence"), "bob")
        XCTAssertNil(PresenceEndpoint.userSegment(of: "/api/v1/users//presence"))
        XCTAssertNil(PresenceEndpoint.userSegment(of: "/api/v1/users/presence"))
        XCTAssertNil(PresenceEndpoint.userSegment(of: "/api/v1/users/a/b/presence"))
        XCTAssertNil(PresenceEndpoint.userSegment(of: "/api/v1/users/bob/connections"))
    }

    // MARK: Coalescing

    func testCoalescedEmitsSendTheLatestOncePerWindow() throws {
        let bob1 = RecordingSink(1), bob2 = RecordingSink(2)
        try connect(bob1, user: "bob", on: shardA)
        try connect(bob2, user: "bob", on: shardB)
        for i in 0..<20 {
            let answer = try emit(#"{"event":"unread:update","to":{"user":"bob"},"data":{"n":\#(i)},"coalesce":{"key":"unread:bob","windowMs":500}}"#)
            XCTAssertEqual(answer.1, try json(#"{"recipients":2}"#))
            advance(ms: 20)
        }
        XCTAssertEqual(bob1.received, [], "held until the window closes (400 ms so far)")
        advance(ms: 99)
        XCTAssertEqual(bob1.received, [])
        advance(ms: 1)
        XCTAssertEqual(bob1.received.count, 1)
        XCTAssertTrue(bob1.received[0].hasPrefix(#"42["unread:update",{"n":19,"#), bob1.received[0])
        XCTAssertEqual(bob2.received, bob1.received, "every socket of the user, on every loop")
        advance(ms: 5_000)
        XCTAssertEqual(bob1.received.count, 1, "sent once")
        // The next one opens a new window; another key has its own.
        _ = try emit(#"{"event":"unread:update","to":{"user":"bob"},"data":{"n":20},"coalesce":{"key":"unread:bob","windowMs":100}}"#)
        _ = try emit(#"{"event":"unread:update","to":{"user":"bob"},"data":{"n":21},"coalesce":{"key":"other","windowMs":300}}"#)
        _ = try emit(#"{"event":"plain:event","to":{"user":"bob"},"data":{"n":22}}"#)
        XCTAssertEqual(bob1.received.count, 2, "an emit without coalesce goes at once")
        advance(ms: 100)
        XCTAssertEqual(bob1.received.count, 3)
        XCTAssertTrue(bob1.received[2].contains(#""n":20"#))
        advance(ms: 200)
        XCTAssertEqual(bob1.received.count, 4)
        XCTAssertTrue(bob1.received[3].contains(#""n":21"#))
        XCTAssertEqual(hub.metrics.counterValue("relay_emits_superseded_total"), 19)
    }

    func testCoalescedRoomEmitsReachWhoeverIsInTheRoomWhenTheWindowCloses() throws {
        let alice = RecordingSink(1), bob = RecordingSink(2)
        try connect(alice, user: "alice", on: shardA)
        try connect(bob, user: "bob", on: shardB)
        _ = try now(hub.membership.join(room: "conversation:1", sink: alice, user: "alice", on: shardA))
        loopB.run()
        for i in 0..<3 {
            _ = try emit(#"{"event":"room:counter","to":{"room":"conversation:1"},"data":{"n":\#(i)},"coalesce":{"key":"c","windowMs":50}}"#)
        }
        _ = try now(hub.membership.join(room: "conversation:1", sink: bob, user: "bob", on: shardB))
        // Recoverable events (bob's presence:join) reach every loop through its task queue.
        loopA.run()
        loopB.run()
        alice.received.removeAll()
        bob.received.removeAll()
        advance(ms: 50)
        XCTAssertEqual(alice.received.count, 1)
        XCTAssertTrue(alice.received[0].contains(#""n":2"#))
        XCTAssertEqual(bob.received, alice.received)
    }

    func testCoalescedEmitsAreNotKeptForRecovery() throws {
        let bob = RecordingSink(1)
        try connect(bob, user: "bob", on: shardA)
        _ = try emit(#"{"event":"unread:update","to":{"user":"bob"},"data":{"n":1},"coalesce":{"key":"k","windowMs":10}}"#)
        _ = try emit(#"{"event":"notification:new","to":{"user":"bob"},"data":{"n":2}}"#)
        advance(ms: 10)
        let history = try now(hub.backends.broker.history(of: .user("bob"), after: .zero, limit: 10, maxBytes: 1 << 20, on: loopA)).get()
        XCTAssertEqual(history.entries.count, 1)
        XCTAssertTrue(String(buffer: history.entries[0].item.packet).contains("notification:new"))
        XCTAssertEqual(bob.received.count, 2)
    }
}

/// The cluster's user directory on a real redis-server: two nodes, each stating its sockets;
/// answers the same from both; a dead node's users are swept; a restatement replaces a node's.
final class RedisDirectoryTests: XCTestCase {
    var group: MultiThreadedEventLoopGroup!
    var redis: RedisServerProcess?
    var buses: [ClusterBus] = []
    var loop: any EventLoop { group.next() }

    override func setUp() async throws {
        group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        redis = try startedRedisServer()
    }

    override func tearDown() async throws {
        for bus in buses { await bus.stop() }
        buses = []
        redis?.kill()
        try await group.shutdownGracefully()
    }

    func node(_ name: String) throws -> (ClusterBus, RedisUserDirectory) {
        let endpoint = try XCTUnwrap(RedisEndpoint(url: "redis://127.0.0.1:\(try XCTUnwrap(redis).port)"))
        let bus = ClusterBus(nodeID: name, redis: RedisClient(endpoint: endpoint, eventLoop: loop), options: .init(heartbeatMs: 2_000), metrics: RelayMetrics().cluster, logger: Logger(label: "test"))
        buses.append(bus)
        bus.start()
        let deadline = Date().addingTimeInterval(10)
        while !bus.isUp, Date() < deadline { usleep(10_000) }
        XCTAssertTrue(bus.isUp)
        return (bus, RedisUserDirectory(bus: bus))
    }

    func users(_ manager: RedisUserDirectory, _ names: [String], rooms: Bool = false) throws -> PresenceAnswer<[UserPresence]> {
        try manager.users(names.map { UserPresence(user: $0, devices: 0) }, withRooms: rooms, on: loop).wait()
    }

    /// Waits for the directory writes queued so far (they are sent in order on one connection).
    func settle(_ bus: ClusterBus) throws {
        _ = try bus.redis.send(["PING"]).wait()
    }

    func testBothNodesAnswerTheSame() throws {
        let (a, ma) = try node("na")
        let (b, mb) = try node("nb")
        ma.updateUser("bob", devices: 1, disconnectedAt: nil)
        ma.updateUser("bob", devices: 2, disconnectedAt: nil)
        mb.updateUser("bob", devices: 1, disconnectedAt: nil)
        mb.updateUser("carol", devices: 1, disconnectedAt: nil)
        _ = try a.presence.update(room: "conversation:1", user: "bob", devices: 2).wait()
        _ = try b.presence.update(room: "conversation:2", user: "bob", devices: 1).wait()
        try settle(a)
        try settle(b)
        let fromA = try users(ma, ["bob", "carol", "dan"], rooms: true)
        let fromB = try users(mb, ["bob", "carol", "dan"], rooms: true)
        XCTAssertFalse(fromA.degraded)
        XCTAssertEqual(fromA.value, fromB.value)
        XCTAssertEqual(fromA.value.map(\.devices), [3, 1, 0])
        XCTAssertEqual(fromA.value[0].rooms, ["conversation:1", "conversation:2"])
        XCTAssertEqual(fromA.value.map(\.lastSeen), [nil, nil, nil])

        mb.updateUser("carol", devices: 0, disconnectedAt: 1)
        try settle(b)
        let carol = try users(ma, ["carol"]).value[0]
        XCTAssertFalse(carol.online)
        XCTAssertNotNil(carol.lastSeen, "last seen on the last disconnect (Redis time)")
        let ttl = try a.redis.send(["PTTL", ClusterKeys.directory("carol")]).wait().int ?? -1
        XCTAssertGreaterThan(ttl, 0, "an offline user's entry expires")
        XCTAssertEqual(try a.redis.send(["PTTL", ClusterKeys.directory("bob")]).wait().int, -1, "an online user's does not")

        // Room presence gone → the user's rooms follow.
        _ = try b.presence.update(room: "conversation:2", user: "bob", devices: 0).wait()
        XCTAssertEqual(try users(ma, ["bob"], rooms: true).value[0].rooms, ["conversation:1"])
    }

    func testADeadNodesUsersAreSweptWithTheirRooms() throws {
        let (a, ma) = try node("na")
        let (b, mb) = try node("nb")
        ma.updateUser("bob", devices: 1, disconnectedAt: nil)
        mb.updateUser("bob", devices: 1, disconnectedAt: nil)
        mb.updateUser("carol", devices: 2, disconnectedAt: nil)
        _ = try b.presence.update(room: "conversation:9", user: "carol", devices: 2).wait()
        try settle(a)
        try settle(b)
        _ = try a.sweeper.sweep(node: "nb").wait()
        let answer = try users(ma, ["bob", "carol"], rooms: true).value
        XCTAssertEqual(answer.map(\.devices), [1, 0])
        XCTAssertEqual(answer[1].rooms, [])
        XCTAssertNotNil(answer[1].lastSeen, "swept users were last seen at the sweep")
        XCTAssertNotNil(answer[0].lastSeen, "bob lost a device with the node")
        XCTAssertEqual(try a.redis.send(["EXISTS", ClusterKeys.nodeUsers("nb")]).wait().int, 0)
    }

    func testARestatementReplacesTheNodesUsers() throws {
        let (a, ma) = try node("na")
        ma.updateUser("bob", devices: 1, disconnectedAt: nil)
        ma.updateUser("carol", devices: 1, disconnectedAt: nil)
        try settle(a)
        // Redis missed carol's disconnect and dan's connect.
        ma.restateUsers(["bob": 2, "dan": 1])
        try settle(a)
        let answer = try users(ma, ["bob", "carol", "dan"]).value
        XCTAssertEqual(answer.map(\.devices), [2, 0, 1])
        XCTAssertNotNil(answer[1].lastSeen)
    }

    func testRedisDownAnswersThisNodesViewDegraded() throws {
        let (a, ma) = try node("na")
        redis?.kill()
        let deadline = Date().addingTimeInterval(10)
        while a.isUp, Date() < deadline { usleep(10_000) }
        let local = [UserPresence(user: "bob", devices: 1, rooms: ["r"], lastSeen: 5)]
        let answer = try ma.users(local, withRooms: true, on: loop).wait()
        XCTAssertTrue(answer.degraded)
        XCTAssertEqual(answer.value, local)
        let room = try RedisPresenceManager(bus: a).roomPresence(room: "r", local: [PresenceEntry(user: "bob", devices: 1)], on: loop).wait()
        XCTAssertTrue(room.degraded)
    }
}
