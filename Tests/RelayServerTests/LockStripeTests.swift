import Dispatch
import NIOConcurrencyHelpers
import NIOCore
import NIOEmbedded
import RelayCore
import XCTest

@testable import RelayServer

/// The hub's state is split over lock stripes (rooms by name, connections by id, sids by sid):
/// what spans stripes — the per-connection room limit, disconnect, typing timers, admin views —
/// behaves as one registry did.
final class LockStripeTests: XCTestCase {
    let loopA = EmbeddedEventLoop()
    let loopB = EmbeddedEventLoop()
    let clock = ManualClock()

    func makeHub(maxRooms: Int = 100, maxMembers: Int = 10_000, maxConnections: Int = 1_000_000, perUser: Int = 20) -> Hub {
        var c = RelayConfiguration(jwt: .hs256(secret: String(repeating: "s", count: 32)), apiKey: "a", adminKey: "b")
        c.events.maxRoomsPerConnection = maxRooms
        c.events.maxMembersPerRoom = maxMembers
        c.connections.maxConnections = maxConnections
        c.connections.maxConnectionsPerUser = perUser
        return Hub(eventLoops: [loopA, loopB], configuration: c, clock: clock.relayClock)
    }

    func connect(_ hub: Hub, _ sink: RecordingSink, user: String, loop: Int = 0) throws {
        try hub.membership.register(sink, sid: "sid-\(sink.connectionID)", user: user, on: hub.partitions[loop])
    }

    func join(_ hub: Hub, _ room: String, _ sink: RecordingSink, user: String, loop: Int = 0) throws {
        _ = try now(hub.membership.join(room: room, sink: sink, user: user, on: hub.partitions[loop]))
    }

    /// Room names that land on at least `count` different room shards.
    func roomsOnDifferentShards(_ count: Int, of hub: Hub) -> [String] {
        var seen = Set<Int>(), rooms: [String] = []
        var i = 0
        while rooms.count < count && i < 10_000 {
            let room = "conversation:\(i)"
            if seen.insert(hub.rooms.rooms.index(for: room)).inserted { rooms.append(room) }
            i += 1
        }
        return rooms
    }

    func testTheRoomLimitSpansShardsAndIsCheckedBeforeRoomFull() throws {
        let hub = makeHub(maxRooms: 3, maxMembers: 1)
        let alice = RecordingSink(1), bob = RecordingSink(2)
        try connect(hub, alice, user: "alice")
        try connect(hub, bob, user: "bob")
        let rooms = roomsOnDifferentShards(5, of: hub)
        XCTAssertEqual(rooms.count, 5, "five rooms on five shards")
        for room in rooms.prefix(3) { try join(hub, room, alice, user: "alice") }
        // The fourth room is on a shard that has never seen alice: still refused.
        XCTAssertThrowsError(try join(hub, rooms[3], alice, user: "alice")) { XCTAssertEqual(($0 as? RelayError)?.code, .tooManyRooms) }
        // Full room and too many rooms at once: the room limit answers first.
        try join(hub, rooms[4], bob, user: "bob")
        XCTAssertThrowsError(try join(hub, rooms[4], alice, user: "alice")) { XCTAssertEqual(($0 as? RelayError)?.code, .tooManyRooms) }
        // A member rejoining at the limit is not refused.
        try join(hub, rooms[0], alice, user: "alice")
        XCTAssertEqual(hub.rooms.rooms(of: alice.connectionID), Set(rooms.prefix(3)))
    }

    func testAFullRoomGivesTheReservedSlotBack() throws {
        let hub = makeHub(maxRooms: 2, maxMembers: 1)
        let alice = RecordingSink(1), bob = RecordingSink(2)
        try connect(hub, alice, user: "alice")
        try connect(hub, bob, user: "bob")
        try join(hub, "full", bob, user: "bob")
        // Refused twice for a full room: each refusal gives the slot back.
        for _ in 0..<2 {
            XCTAssertThrowsError(try join(hub, "full", alice, user: "alice")) { XCTAssertEqual(($0 as? RelayError)?.code, .roomFull) }
        }
        XCTAssertFalse(hub.rooms.isMember(room: "full", connection: alice.connectionID))
        try join(hub, "a", alice, user: "alice")
        try join(hub, "b", alice, user: "alice")
        XCTAssertEqual(hub.rooms.rooms(of: alice.connectionID), ["a", "b"])
    }

    func testDisconnectLeavesEveryRoomOnEveryShardAndAnnouncesIt() throws {
        let hub = makeHub()
        let alice = RecordingSink(1), bob = RecordingSink(2)
        try connect(hub, alice, user: "alice")
        try connect(hub, bob, user: "bob", loop: 1)
        let rooms = roomsOnDifferentShards(20, of: hub)
        for room in rooms {
            try join(hub, room, alice, user: "alice")
            try join(hub, room, bob, user: "bob", loop: 1)
        }
        loopB.run()
        bob.received.removeAll()
        XCTAssertEqual(hub.rooms.roomCount, 20)
        hub.membership.unregister(alice.connectionID, sid: "sid-1", user: "alice", on: hub.partitions[0])
        loopA.run()
        loopB.run()
        XCTAssertEqual(hub.rooms.roomCount, 20, "bob is still in each")
        XCTAssertEqual(hub.rooms.rooms(of: alice.connectionID), [])
        for room in rooms { XCTAssertEqual(hub.rooms.presence(room: room), [PresenceEntry(user: "bob", devices: 1)]) }
        let leaves = bob.received.filter { $0.hasPrefix(#"42["presence:leave""#) }
        XCTAssertEqual(leaves.count, 20, "one presence:leave per room")
        hub.membership.unregister(bob.connectionID, sid: "sid-2", user: "bob", on: hub.partitions[1])
        XCTAssertEqual(hub.rooms.roomCount, 0)
        XCTAssertEqual(hub.rooms.roomSizes(), RoomSizeHistogram())
        XCTAssertEqual(hub.connectionCount, 0)
    }

    func testAdminViewsMergeTheShards() throws {
        let hub = makeHub()
        var next: UInt64 = 0
        let rooms = roomsOnDifferentShards(6, of: hub)
        var sizes: [String: Int] = [:]
        for (i, room) in rooms.enumerated() {
            let members = i == 5 ? 3 : i + 1  // two rooms of 3: ties go by name
            sizes[room] = members
            for _ in 0..<members {
                next += 1
                let sink = RecordingSink(next)
                try connect(hub, sink, user: "u\(next)")
                try join(hub, room, sink, user: "u\(next)")
            }
        }
        let expected = rooms.sorted { sizes[$0]! != sizes[$1]! ? sizes[$0]! > sizes[$1]! : $0 < $1 }
        XCTAssertEqual(hub.rooms.busiestRooms(limit: 3).map(\.room), Array(expected.prefix(3)))
        XCTAssertEqual(hub.rooms.busiestRooms(limit: 10).map(\.members), expected.map { sizes[$0]! })
        let page = hub.rooms.roomsPage(prefix: "conversation:", offset: 1, limit: 2)
        XCTAssertEqual(page.total, 6)
        XCTAssertEqual(page.rooms.map(\.room), Array(expected[1...2]))
        let histogram = hub.rooms.roomSizes()
        XCTAssertEqual(histogram.rooms, 6)
        XCTAssertEqual(histogram.sum, sizes.values.reduce(0, +))
        XCTAssertEqual(hub.locate(sid: "sid-3")?.0, ConnectionID(3))
        XCTAssertEqual(hub.connections(of: "u3").map(\.1), [[rooms[1]]])
    }

    func testTypingFromRoomsOnManyShardsFlushesInRoomOrder() throws {
        let hub = makeHub()
        let alice = RecordingSink(1), bob = RecordingSink(2)
        try connect(hub, alice, user: "alice")
        try connect(hub, bob, user: "bob")
        let rooms = roomsOnDifferentShards(8, of: hub)
        for room in rooms {
            try join(hub, room, alice, user: "alice")
            try join(hub, room, bob, user: "bob")
        }
        loopA.run()
        bob.received.removeAll()
        for room in rooms.reversed() { hub.typing.change(true, room: room, user: "alice", connection: alice.connectionID) }
        clock.advance(ms: 100)
        loopA.advanceTime(by: .milliseconds(100))
        let starts = bob.received.filter { $0.hasPrefix(#"42["typing:start""#) }
        XCTAssertEqual(starts.count, 8, "one window per room, one flush for all shards")
        let order = starts.compactMap { line in rooms.first { line.contains("\"room\":\"\($0)\"") } }
        XCTAssertEqual(order, rooms.sorted())
        // Disconnecting stops alice's typing in every shard's window.
        bob.received.removeAll()
        hub.membership.unregister(alice.connectionID, sid: "sid-1", user: "alice", on: hub.partitions[0])
        clock.advance(ms: 100)
        loopA.advanceTime(by: .milliseconds(100))
        XCTAssertEqual(bob.received.filter { $0.hasPrefix(#"42["typing:stop""#) }.count, 8)
    }

    func testTheNodeWideConnectionLimitSpansUserShards() throws {
        let hub = makeHub(maxConnections: 3, perUser: 1)
        for i in 1...3 { try connect(hub, RecordingSink(UInt64(i)), user: "user-\(i)") }
        XCTAssertEqual(hub.connectionCount, 3)
        XCTAssertEqual(hub.registry.userCount, 3)
        XCTAssertThrowsError(try connect(hub, RecordingSink(4), user: "user-4")) { XCTAssertEqual(($0 as? RelayError)?.code, .tooManyConnections) }
        hub.membership.unregister(ConnectionID(2), sid: "sid-2", user: "user-2", on: hub.partitions[0])
        XCTAssertEqual(hub.connectionCount, 2)
        // Refused for its user (one device each): the place it reserved is given back.
        for id in 5...9 {
            XCTAssertThrowsError(try connect(hub, RecordingSink(UInt64(id)), user: "user-1")) {
                XCTAssertEqual(($0 as? RelayError)?.code, .tooManyConnections)
            }
        }
        XCTAssertEqual(hub.connectionCount, 2)
        try connect(hub, RecordingSink(10), user: "user-4")
        XCTAssertEqual(hub.connectionCount, 3)
        // Unregistering a connection twice (or one never registered) frees nothing more.
        hub.membership.unregister(ConnectionID(2), sid: "sid-2", user: "user-2", on: hub.partitions[0])
        hub.membership.unregister(ConnectionID(99), sid: "sid-99", user: "user-99", on: hub.partitions[0])
        XCTAssertEqual(hub.connectionCount, 3)
        XCTAssertThrowsError(try connect(hub, RecordingSink(11), user: "user-5"))
    }

    func testAudienceReadsFromManyThreadsAtOnce() throws {
        let hub = makeHub()
        let rooms = roomsOnDifferentShards(16, of: hub)
        var next: UInt64 = 0
        for room in rooms {
            for _ in 0..<2 {
                next += 1
                let sink = RecordingSink(next)
                try connect(hub, sink, user: "u\(next)")
                try join(hub, room, sink, user: "u\(next)")
            }
        }
        // What every publish reads, from 8 threads at once over every room shard.
        let counts = NIOLockedValueBox<[Int]>([])
        DispatchQueue.concurrentPerform(iterations: 8) { t in
            var local: [Int] = []
            for i in 0..<200 {
                let room = rooms[(t + i) % rooms.count]
                local.append(hub.publisher.roomAudience(room, excludeConnection: nil, origin: nil).recipients)
            }
            counts.withLockedValue { $0 += local }
        }
        let all = counts.withLockedValue { $0 }
        XCTAssertEqual(all.count, 1_600)
        XCTAssertTrue(all.allSatisfy { $0 == 2 })
    }
}
