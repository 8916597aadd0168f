import NIOConcurrencyHelpers
import Foundation
import NIOCore
import NIOEmbedded
import RelayCore
import RelayTestSupport
import XCTest

@testable import RelayServer

/// A sink that records what it is sent.
final class RecordingSink: ConnectionSink {
    /// Rooms this sink's (pretend) token allows; `nil` allows every room.
    var allowedRooms: Set<String>?
    func mayAccess(room: String) -> Bool { allowedRooms?.contains(room) ?? true }
    let connectionID: ConnectionID
    var received: [String] = []
    var flushes = 0
    var closed: UInt16?
    init(_ id: UInt64) { connectionID = ConnectionID(id) }
    func enqueue(_ message: OutboundMessage) { received.append(String(buffer: message.bytes)) }
    func flushOutbound() { flushes += 1 }
    func close(code: UInt16, reason: String) { closed = code }
    var isClosing: Bool { closed != nil }
}

/// A sink that, on each message, records what `probe` says at that moment.
final class ProbeSink: ConnectionSink {
    let connectionID: ConnectionID
    let probe: () -> Int
    var seen: [Int] = []
    init(_ id: UInt64, probe: @escaping () -> Int) {
        connectionID = ConnectionID(id)
        self.probe = probe
    }
    func enqueue(_ message: OutboundMessage) { seen.append(probe()) }
    func flushOutbound() {}
    func close(code: UInt16, reason: String) {}
    var isClosing: Bool { false }
    func mayAccess(room: String) -> Bool { true }
}

/// The value of an already-completed future (embedded loops complete them inline).
func now<T: Sendable>(_ future: EventLoopFuture<T>) throws -> T {
    // Embedded loops complete the future inline, on this thread.
    let box = NIOLockedValueBox<Result<T, Error>?>(nil)
    future.whenComplete { value in box.withLockedValue { $0 = value } }
    guard let result = box.withLockedValue({ $0 }) else { throw NSError(domain: "test", code: 1, userInfo: [NSLocalizedDescriptionKey: "future not completed"]) }
    return try result.get()
}

final class HubTests: XCTestCase {
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

    /// A non-recoverable event (no history here) runs inline on the caller's loop, but only once
    /// every other loop has its delivery posted: a large room's other half never waits for the
    /// local half's writes.
    func testOtherLoopsHaveTheirDeliveryBeforeTheCallersLoopWritesItsOwn() throws {
        var c = RelayConfiguration(jwt: .hs256(secret: String(repeating: "s", count: 32)), apiKey: "a", adminKey: "b")
        c.recovery.historyLimits = HistoryLimits.testing(maxEvents: 0)
        let hub = Hub(eventLoops: [loopA, loopB], configuration: c, clock: clock.relayClock)
        let shardA = hub.partitions[0], shardB = hub.partitions[1]
        let alice = ProbeSink(1) { shardB.pendingDeliveries }
        let bob = RecordingSink(2)
        try hub.membership.register(alice, sid: "sid-1", user: "alice", on: shardA)
        try hub.membership.register(bob, sid: "sid-2", user: "bob", on: shardB)
        _ = try now(hub.membership.join(room: "r", sink: alice, user: "alice", on: shardA))
        _ = try now(hub.membership.join(room: "r", sink: bob, user: "bob", on: shardB))
        loopA.run()
        loopB.run()
        alice.seen.removeAll()
        bob.received.removeAll()
        XCTAssertEqual(hub.publisher.publish(room: "r", event: EventPolicyTable.backend("bench:msg"), payload: .string("hi")), 2)
        XCTAssertEqual(alice.seen, [1], "loop B's delivery was posted before loop A wrote to alice")
        loopB.run()
        XCTAssertEqual(bob.received, ["42[\"bench:msg\",\"hi\"]"])
        hub.publisher.publish(user: "alice", event: EventPolicyTable.backend("bench:msg"), payload: .string("again"))
        XCTAssertEqual(alice.seen, [1, 0], "a user delivery runs inline too (alice has no socket on B)")
    }

    func testEventReachesMembersOnEveryLoopExceptTheSender() throws {
        let alice = RecordingSink(1), bob = RecordingSink(2), carol = RecordingSink(3)
        try connect(alice, user: "alice", on: shardA)
        try connect(bob, user: "bob", on: shardB)
        try connect(carol, user: "carol", on: shardB)
        _ = try now(hub.membership.join(room: "r", sink: alice, user: "alice", on: shardA))
        _ = try now(hub.membership.join(room: "r", sink: bob, user: "bob", on: shardB))
        _ = try now(hub.membership.join(room: "r", sink: carol, user: "carol", on: shardB))
        loopB.run()
        bob.received.removeAll()
        carol.received.removeAll()

        // Both embedded loops run on the test thread, so delivery may be inline or through
        // `execute`; running loop B settles it either way.
        let n = hub.publisher.publish(room: "r", event: EventPolicyTable.backend("x:y"), payload: ["room": "r"], excludeConnection: alice.connectionID)
        XCTAssertEqual(n, 2)
        loopB.run()
        XCTAssertEqual(bob.received, [#"42["x:y",{"room":"r"}]"#])
        XCTAssertEqual(carol.received, [#"42["x:y",{"room":"r"}]"#])
        XCTAssertEqual(alice.received.filter { $0.contains("x:y") }, [], "the sender is excluded")
    }

    func testPresenceCountsDevicesAndAnnouncesFirstAndLast() throws {
        let bob1 = RecordingSink(1), bob2 = RecordingSink(2), alice = RecordingSink(3)
        try connect(alice, user: "alice", on: shardA)
        try connect(bob1, user: "bob", on: shardA)
        try connect(bob2, user: "bob", on: shardB)
        _ = try now(hub.membership.join(room: "r", sink: alice, user: "alice", on: shardA))
        _ = try now(hub.membership.join(room: "r", sink: bob1, user: "bob", on: shardA))
        let presence = try now(hub.membership.join(room: "r", sink: bob2, user: "bob", on: shardB))
        XCTAssertEqual(presence, [PresenceEntry(user: "alice", devices: 1), PresenceEntry(user: "bob", devices: 2)])
        loopA.run()
        loopB.run()
        XCTAssertEqual(alice.received.filter { $0.contains("presence:join") }.count, 1, "bob's second device is not a new presence")

        XCTAssertTrue(hub.membership.leave(room: "r", connection: bob1.connectionID, on: shardA))
        XCTAssertEqual(alice.received.filter { $0.contains("presence:leave") }.count, 0)
        hub.membership.unregister(bob2.connectionID, sid: "sid-2", user: "bob", on: shardB)
        loopA.run()
        XCTAssertEqual(alice.received.filter { $0.contains("presence:leave") }.count, 1)
        XCTAssertEqual(hub.rooms.presence(room: "r"), [PresenceEntry(user: "alice", devices: 1)])
    }

    func testUserEventsReachEveryDeviceOnEveryLoop() throws {
        let b1 = RecordingSink(1), b2 = RecordingSink(2)
        try connect(b1, user: "bob", on: shardA)
        try connect(b2, user: "bob", on: shardB)
        XCTAssertEqual(hub.publisher.publish(user: "bob", event: EventPolicyTable.backend("notification:new"), payload: ["t": 1]), 2)
        loopA.run()
        loopB.run()
        XCTAssertEqual(b1.received, [#"42["notification:new",{"t":1}]"#])
        XCTAssertEqual(b2.received, b1.received)
        XCTAssertEqual(hub.publisher.publish(user: "nobody", event: EventPolicyTable.backend("notification:new"), payload: [:]), 0)
    }

    func testReceiptGoesToRoomAndToAuthorDevicesOutsideItOnce() throws {
        let author1 = RecordingSink(1), author2 = RecordingSink(2), reader = RecordingSink(3)
        try connect(author1, user: "alice", on: shardA)
        try connect(author2, user: "alice", on: shardB)
        try connect(reader, user: "bob", on: shardA)
        _ = try now(hub.membership.join(room: "r", sink: author1, user: "alice", on: shardA))
        _ = try now(hub.membership.join(room: "r", sink: reader, user: "bob", on: shardA))
        loopA.run()
        loopB.run()
        for s in [author1, author2, reader] { s.received.removeAll() }
        hub.publisher.publishReceipt(Receipt(id: 5, room: "r", messageID: "m", authorID: "alice", userID: "bob", kind: .read, ts: 1), excludeConnection: reader.connectionID)
        loopA.run()
        loopB.run()
        XCTAssertEqual(author1.received.count, 1, "in the room: once")
        XCTAssertEqual(author2.received.count, 1, "outside the room: once, as the author")
        XCTAssertEqual(reader.received.count, 0, "the sending socket is excluded")
        XCTAssertTrue(author2.received[0].hasPrefix(#"42["message:read",{"id":5,"#))
    }

    func testTypingFlushesOnceAfterTheWindowWithNetChanges() throws {
        let alice = RecordingSink(1), bob = RecordingSink(2)
        try connect(alice, user: "alice", on: shardA)
        try connect(bob, user: "bob", on: shardA)
        _ = try now(hub.membership.join(room: "r", sink: alice, user: "alice", on: shardA))
        _ = try now(hub.membership.join(room: "r", sink: bob, user: "bob", on: shardA))
        loopA.run()
        bob.received.removeAll()
        hub.typing.change(true, room: "r", user: "alice", connection: alice.connectionID)
        hub.typing.change(true, room: "r", user: "alice", connection: alice.connectionID)
        clock.advance(ms: 99)
        loopA.advanceTime(by: .milliseconds(99))
        XCTAssertEqual(bob.received, [])
        clock.advance(ms: 1)
        loopA.advanceTime(by: .milliseconds(1))
        XCTAssertEqual(bob.received.count, 1)
        XCTAssertTrue(bob.received[0].hasPrefix(#"42["typing:start",{"room":"r","from":"alice""#), bob.received[0])
        XCTAssertEqual(alice.received.filter { $0.contains("typing") }, [], "the typing user does not hear itself")
        // Start and stop inside one window cancel.
        hub.typing.change(false, room: "r", user: "alice", connection: alice.connectionID)
        hub.typing.change(true, room: "r", user: "alice", connection: alice.connectionID)
        clock.advance(ms: 100)
        loopA.advanceTime(by: .milliseconds(100))
        XCTAssertEqual(bob.received.count, 1)
        // Not refreshed for 5 s: expires as a stop.
        clock.advance(ms: 5000)
        loopA.advanceTime(by: .milliseconds(5000))
        XCTAssertEqual(bob.received.count, 2)
        XCTAssertTrue(bob.received[1].hasPrefix(#"42["typing:stop""#))
    }

    func testLiveShareExpiresWithLocationStop() throws {
        let alice = RecordingSink(1), bob = RecordingSink(2)
        try connect(alice, user: "alice", on: shardA)
        try connect(bob, user: "bob", on: shardA)
        _ = try now(hub.membership.join(room: "r", sink: alice, user: "alice", on: shardA))
        _ = try now(hub.membership.join(room: "r", sink: bob, user: "bob", on: shardA))
        try hub.locations.start(room: "r", user: "alice", connection: alice.connectionID, durationSec: 2)
        XCTAssertNoThrow(try hub.locations.check(room: "r", user: "alice"))
        loopA.run()
        bob.received.removeAll()
        clock.advance(ms: 2000)
        loopA.advanceTime(by: .milliseconds(2000))
        XCTAssertEqual(bob.received.count, 1)
        XCTAssertTrue(bob.received[0].contains(#""reason":"expired""#), bob.received[0])
        XCTAssertThrowsError(try hub.locations.check(room: "r", user: "alice"))
    }

    func testPerUserConnectionLimit() throws {
        let c = RelayConfiguration(jwt: .hs256(secret: String(repeating: "s", count: 32)), apiKey: "a", adminKey: "b")
        var limited = c
        limited.connections.maxConnectionsPerUser = 1
        let hub = Hub(eventLoops: [loopA], configuration: limited, clock: clock.relayClock)
        try hub.membership.register(RecordingSink(1), sid: "a", user: "u", on: hub.partitions[0])
        XCTAssertThrowsError(try hub.membership.register(RecordingSink(2), sid: "b", user: "u", on: hub.partitions[0])) { error in
            XCTAssertEqual((error as? RelayError)?.code, .tooManyConnections)
        }
    }
}
