import NIOCore
import NIOEmbedded
import RelayCore
import RelayTestSupport
import XCTest

@testable import RelayServer

/// `receipt-window-ms`: committed receipts of a room go out together, one batch event per room
/// and kind for every reader in the window, to the kind's audience.
final class ReceiptWindowTests: XCTestCase {
    let loop = EmbeddedEventLoop()
    let clock = ManualClock()

    func makeHub() -> Hub {
        let c = RelayConfiguration(jwt: .hs256(secret: String(repeating: "s", count: 32)), apiKey: "a", adminKey: "b")
        return Hub(eventLoops: [loop], configuration: c, clock: clock.relayClock)
    }

    func members(_ hub: Hub, _ names: [String]) throws -> [RecordingSink] {
        try names.enumerated().map { i, user in
            let sink = RecordingSink(UInt64(i + 1))
            try hub.membership.register(sink, sid: "s\(i)", user: user, on: hub.partitions[0])
            _ = try now(hub.membership.join(room: "r", sink: sink, user: user, on: hub.partitions[0]))
            return sink
        }
    }

    func receipt(_ id: Int64, reader: String) -> Receipt {
        Receipt(id: id, room: "r", messageID: "m", authorID: "alice", userID: reader, kind: .read, ts: 1)
    }

    func testReadersInOneWindowMakeOneEvent() throws {
        let hub = makeHub()
        let sinks = try members(hub, ["alice", "bob", "carol", "dave"])
        loop.run()
        for s in sinks { s.received.removeAll() }
        let windows = ReceiptForwardService(
            windowMs: 100, audiences: ReceiptAudiences(delivered: .room, read: .room), stripes: 4, timerLoop: loop, clock: clock.relayClock,
            publisher: hub.publisher)
        windows.add([receipt(1, reader: "bob")], room: "r", kind: .read)
        clock.advance(ms: 50)
        windows.add([receipt(2, reader: "carol")], room: "r", kind: .read)
        loop.run()
        XCTAssertEqual(sinks[0].received, [], "held until the window closes")
        clock.advance(ms: 50)
        windows.flushDue()
        loop.run()
        let alice = sinks[0].received
        XCTAssertEqual(alice.count, 1, "one event for both readers")
        XCTAssertTrue(alice[0].hasPrefix(#"42["message:read",{"room":"r","kind":"read","items":["#), alice[0])
        XCTAssertTrue(alice[0].contains(#""userId":"bob""#) && alice[0].contains(#""userId":"carol""#))
        XCTAssertEqual(sinks[3].received.count, 1, "every member, once")
        XCTAssertEqual(sinks[1].received.count, 1, "a reader gets the batch with its own receipt in it")
    }

    func testOneReaderKeepsItsFrom() throws {
        let hub = makeHub()
        let sinks = try members(hub, ["alice", "bob"])
        loop.run()
        for s in sinks { s.received.removeAll() }
        let windows = ReceiptForwardService(
            windowMs: 100, audiences: ReceiptAudiences(delivered: .room, read: .room), stripes: 4, timerLoop: loop, clock: clock.relayClock,
            publisher: hub.publisher)
        windows.add([receipt(1, reader: "bob"), receipt(2, reader: "bob")], room: "r", kind: .read)
        windows.flushAll()
        loop.run()
        XCTAssertTrue(sinks[0].received.first?.hasPrefix(#"42["message:read",{"room":"r","from":"bob","kind":"read","items":["#) == true, "\(sinks[0].received)")
    }

    func testDevicesAudienceWithAWindow() throws {
        let hub = makeHub()
        let sinks = try members(hub, ["alice", "bob", "carol", "dave"])
        loop.run()
        for s in sinks { s.received.removeAll() }
        let windows = ReceiptForwardService(
            windowMs: 100, audiences: ReceiptAudiences(delivered: .room, read: .devices), stripes: 4, timerLoop: loop, clock: clock.relayClock,
            publisher: hub.publisher)
        windows.add([receipt(1, reader: "bob")], room: "r", kind: .read)
        windows.add([receipt(2, reader: "carol")], room: "r", kind: .read)
        clock.advance(ms: 100)
        windows.flushDue()
        loop.run()
        XCTAssertEqual(sinks[0].received.count, 1, "the author: both items in one event")
        XCTAssertTrue(sinks[0].received[0].contains(#""userId":"bob""#) && sinks[0].received[0].contains(#""userId":"carol""#))
        XCTAssertEqual(sinks[1].received.count, 1, "bob: his own item")
        XCTAssertFalse(sinks[1].received[0].contains("carol"))
        XCTAssertEqual(sinks[3].received, [], "dave neither wrote nor read: nothing")
    }
}
