import NIOConcurrencyHelpers
import NIOCore
import NIOEmbedded
import RelayCore
import XCTest

@testable import RelayServer
@testable import RelayBackends

/// A memory broker that runs `beforeAppend` when a publish reaches it: what another loop does
/// between the publisher's read of the audience and the event's append to the history.
final class InterleavingBroker: ForwardingBroker, @unchecked Sendable {  // `beforeAppend` is set before use, on the test's thread
    var beforeAppend: (() -> Void)?

    override func publish(_ publication: Publication, to stream: StreamKey, routing: Routing, recoverable: Bool, deliver: @escaping @Sendable (StreamOffset?) -> Void) {
        let hook = beforeAppend
        beforeAppend = nil
        hook?()
        super.publish(publication, to: stream, routing: routing, recoverable: recoverable, deliver: deliver)
    }
}

/// A recovering socket joins its rooms, then reads what it missed from the history; live events
/// after that reach it. An event whose audience was read before the join but which is appended
/// after the read must still reach it live (found by the e2e recovery race test, 1 in ~15 rounds
/// under load): the loops of a recoverable event are read again once it has its offset.
final class PublishRaceTests: XCTestCase {
    func testARecoverableEventReachesASocketThatJoinedAfterItsAudienceWasRead() throws {
        let loopA = EmbeddedEventLoop(), loopB = EmbeddedEventLoop()
        var c = RelayConfiguration(jwt: .hs256(secret: String(repeating: "s", count: 32)), apiKey: "a", adminKey: "b")
        c.connections.maxConnectionsPerUser = 20
        let broker = InterleavingBroker(MemoryBroker(limits: c.recovery.historyLimits, wallMs: { 1_700_000_000_000 }))
        let hub = Hub(eventLoops: [loopA, loopB], configuration: c, broker: broker)
        let bob = RecordingSink(1), amy = RecordingSink(2)
        try hub.membership.register(bob, sid: "s1", user: "bob", on: hub.partitions[0])
        try hub.membership.register(amy, sid: "s2", user: "amy", on: hub.partitions[1])
        _ = try hub.membership.join(room: "r", sink: bob, user: "bob", on: hub.partitions[0])
        loopA.run()
        // Amy's socket (on loop B) joins after the publish read the room's loops (only A) and
        // reads the history before the event is appended: she must get it live.
        broker.beforeAppend = {
            _ = try? hub.membership.join(room: "r", sink: amy, user: "amy", on: hub.partitions[1])
            let page = try? broker.history(of: .room("r"), after: .zero, limit: 10, maxBytes: 1 << 20, on: loopB).wait().get()
            let ticks = page?.entries.filter { String(buffer: $0.item.packet).contains("chat:tick") }
            XCTAssertEqual(ticks?.count, 0, "appended after her read")
        }
        hub.publisher.publish(room: "r", event: EventPolicyTable.backend("chat:tick"), payload: ["room": "r", "n": 1])
        loopA.run()
        loopB.run()
        XCTAssertEqual(bob.received.filter { $0.contains("chat:tick") }.count, 1)
        XCTAssertEqual(amy.received.filter { $0.contains("chat:tick") }.count, 1, "\(amy.received)")
    }
}
