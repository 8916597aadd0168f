import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOEmbedded
import RelayBackends
import RelayCore
import RelayTestSupport
import XCTest

@testable import RelayServer

/// Presence without flicker (`presence-grace-ms`), on one node, with an injected clock: a user
/// whose connection dropped and who is back within the grace causes no `presence:leave` or
/// `presence:join`, no offline/online or vacated/occupied webhook crossing, and is online for
/// the presence API meanwhile; one who is not back leaves at the deadline; a `41` or a kick is
/// not held.
final class PresenceGraceTests: XCTestCase {
    let loop = EmbeddedEventLoop()
    let clock = ManualClock()

    /// The webhook presence crossings the node reports, recorded.
    final class RecordingPresence: WebhookPresence {
        private let recorded = NIOLockedValueBox<[String]>([])
        var changes: [String] { recorded.withLockedValue { $0 } }
        func setCrossingHandler(_ handler: @escaping @Sendable (PresenceCrossing) -> Void) {}
        func change(_ subject: PresenceSubject, _ name: String, present: Bool) {
            recorded.withLockedValue { $0.append("\(subject == .user ? "user" : "room") \(name) \(present ? "in" : "out")") }
        }
        func leave() async {}
    }

    func makeHub(graceMs: Int) -> (Hub, RecordingPresence) {
        var c = RelayConfiguration(jwt: .hs256(secret: String(repeating: "s", count: 32)), apiKey: "a", adminKey: "b")
        c.events.presenceGraceMs = graceMs
        var hookSettings = c.webhooks
        hookSettings.urls = ["http://127.0.0.1:9/hook"]
        hookSettings.secret = String(repeating: "w", count: 32)
        let presence = RecordingPresence()
        let hooks = Webhooks(settings: hookSettings, nodeID: "n1", presence: presence, clock: clock.relayClock, registry: PrometheusRegistry(), logger: Logger(label: "test"))
        return (Hub(eventLoops: [loop], configuration: c, clock: clock.relayClock, webhooks: hooks), presence)
    }

    func presenceEvents(_ sink: RecordingSink) -> [String] {
        sink.received.filter { $0.contains("presence:") }.map { $0.contains("presence:join") ? "join" : "leave" }
    }

    func online(_ hub: Hub, _ user: String) throws -> Bool {
        try now(hub.presence.userPresence([user], withRooms: false, on: loop)).value.first?.devices ?? 0 > 0
    }

    /// alice (connection 1) and bob (2) in room r.
    func aliceAndBob(_ hub: Hub) throws -> (RecordingSink, RecordingSink) {
        let alice = RecordingSink(1), bob = RecordingSink(2)
        let p = hub.partitions[0]
        try hub.membership.register(alice, sid: "s1", user: "alice", on: p)
        try hub.membership.register(bob, sid: "s2", user: "bob", on: p)
        _ = try now(hub.membership.join(room: "r", sink: alice, user: "alice", on: p))
        _ = try now(hub.membership.join(room: "r", sink: bob, user: "bob", on: p))
        loop.run()
        bob.received = []
        return (alice, bob)
    }

    func testADropAndAReturnWithinTheGraceShowNothing() throws {
        let (hub, hooks) = makeHub(graceMs: 5_000)
        let (alice, bob) = try aliceAndBob(hub)
        let before = hooks.changes
        let p = hub.partitions[0]
        hub.membership.unregister(alice.connectionID, sid: "s1", user: "alice", on: p, holdPresence: true)
        loop.run()
        XCTAssertEqual(presenceEvents(bob), [], "no presence:leave while alice may come back")
        XCTAssertEqual(hub.rooms.presence(room: "r").map(\.user), ["alice", "bob"], "still in the room's presence")
        XCTAssertTrue(try online(hub, "alice"), "online for the presence API during the grace")
        XCTAssertEqual(hooks.changes, before, "no webhook crossing")

        clock.advance(ms: 3_000)
        let back = RecordingSink(3)
        try hub.membership.register(back, sid: "s3", user: "alice", on: p)
        let list = try now(hub.membership.join(room: "r", sink: back, user: "alice", on: p))
        XCTAssertEqual(list, [PresenceEntry(user: "alice", devices: 1), PresenceEntry(user: "bob", devices: 1)])
        loop.run()
        clock.advance(ms: 2_000)
        hub.grace.endDue()
        loop.run()
        XCTAssertEqual(presenceEvents(bob), [], "no presence:join when she is back, no leave at the deadline")
        XCTAssertEqual(hooks.changes, before, "no offline/online, no vacated/occupied")
        XCTAssertTrue(try online(hub, "alice"))
    }

    func testADropNotFollowedByAReturnLeavesAtTheDeadline() throws {
        let (hub, hooks) = makeHub(graceMs: 5_000)
        let (alice, bob) = try aliceAndBob(hub)
        let p = hub.partitions[0]
        hub.membership.unregister(alice.connectionID, sid: "s1", user: "alice", on: p, holdPresence: true)
        clock.advance(ms: 4_999)
        hub.grace.endDue()
        loop.run()
        XCTAssertEqual(presenceEvents(bob), [])
        clock.advance(ms: 1)
        hub.grace.endDue()
        loop.run()
        XCTAssertEqual(presenceEvents(bob), ["leave"])
        XCTAssertEqual(hub.rooms.presence(room: "r").map(\.user), ["bob"])
        XCTAssertFalse(try online(hub, "alice"))
        XCTAssertEqual(hooks.changes.suffix(1), ["user alice out"])
    }

    func testALastMemberHeldKeepsTheRoomOccupied() throws {
        let (hub, hooks) = makeHub(graceMs: 5_000)
        let p = hub.partitions[0]
        let alice = RecordingSink(1)
        try hub.membership.register(alice, sid: "s1", user: "alice", on: p)
        _ = try now(hub.membership.join(room: "solo", sink: alice, user: "alice", on: p))
        hub.membership.unregister(alice.connectionID, sid: "s1", user: "alice", on: p, holdPresence: true)
        XCTAssertEqual(hooks.changes, ["user alice in", "room solo in"], "not vacated during the grace")
        clock.advance(ms: 5_000)
        hub.grace.endDue()
        XCTAssertEqual(hooks.changes, ["user alice in", "room solo in", "room solo out", "user alice out"])
    }

    func testLeavingOnPurposeIsNotHeld() throws {
        let (hub, _) = makeHub(graceMs: 5_000)
        let (alice, bob) = try aliceAndBob(hub)
        // A `41` (or a kick): ClientSession asks for no hold.
        hub.membership.unregister(alice.connectionID, sid: "s1", user: "alice", on: hub.partitions[0], holdPresence: false)
        loop.run()
        XCTAssertEqual(presenceEvents(bob), ["leave"])
        XCTAssertFalse(try online(hub, "alice"))
    }

    func testNoGraceLeavesAtOnce() throws {
        let (hub, _) = makeHub(graceMs: 0)
        let (alice, bob) = try aliceAndBob(hub)
        hub.membership.unregister(alice.connectionID, sid: "s1", user: "alice", on: hub.partitions[0], holdPresence: true)
        loop.run()
        XCTAssertEqual(presenceEvents(bob), ["leave"])
    }

    func testShutdownEndsEveryHold() throws {
        let (hub, _) = makeHub(graceMs: 5_000)
        let (alice, bob) = try aliceAndBob(hub)
        hub.membership.unregister(alice.connectionID, sid: "s1", user: "alice", on: hub.partitions[0], holdPresence: true)
        hub.endPresenceHolds()
        loop.run()
        XCTAssertEqual(presenceEvents(bob), ["leave"])
        XCTAssertFalse(try online(hub, "alice"))
    }

    func testWhichEndsHoldPresence() {
        let held = ConnectionEnd.allCases.filter(\.holdsPresence).map(\.metricLabel).sorted()
        XCTAssertEqual(held, ["client", "closed", "ping_timeout", "replaced", "shutdown", "slow_consumer", "token_expired"])
    }
}
