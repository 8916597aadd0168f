import NIOCore
import NIOEmbedded
import RelayCore
import RelayTestSupport
import XCTest

@testable import RelayServer

/// `receipt-audience devices`: a committed receipt goes to its authors' devices and the reader's
/// other devices only, each where its token allows the room; the other members get nothing.
/// `room` (the default) is `HubTests.testReceiptGoesToRoomAndToAuthorDevicesOutsideItOnce`.
final class ReceiptAudienceTests: XCTestCase {
    let loopA = EmbeddedEventLoop()
    let loopB = EmbeddedEventLoop()
    let clock = ManualClock()
    lazy var hub: Hub = {
        let c = RelayConfiguration(jwt: .hs256(secret: String(repeating: "s", count: 32)), apiKey: "a", adminKey: "b")
        return Hub(eventLoops: [loopA, loopB], configuration: c, clock: clock.relayClock)
    }()

    func connect(_ sink: RecordingSink, user: String, loop: Int, room: String? = "r") throws {
        let p = hub.partitions[loop]
        try hub.membership.register(sink, sid: "sid-\(sink.connectionID)", user: user, on: p)
        if let room { _ = try now(hub.membership.join(room: room, sink: sink, user: user, on: p)) }
    }

    func runLoops() {
        loopA.run()
        loopB.run()
    }

    func testDevicesAudienceReachesAuthorsAndTheReadersOtherDevicesOnly() throws {
        let aliceInRoom = RecordingSink(1), aliceElsewhere = RecordingSink(2), aliceNotAllowed = RecordingSink(3)
        let bobSending = RecordingSink(4), bobOther = RecordingSink(5), carol = RecordingSink(6), dave = RecordingSink(7)
        aliceNotAllowed.allowedRooms = ["elsewhere"]
        try connect(aliceInRoom, user: "alice", loop: 0)
        try connect(aliceElsewhere, user: "alice", loop: 1, room: nil)
        try connect(aliceNotAllowed, user: "alice", loop: 1, room: nil)
        try connect(bobSending, user: "bob", loop: 0)
        try connect(bobOther, user: "bob", loop: 1, room: nil)
        try connect(carol, user: "carol", loop: 0)
        try connect(dave, user: "dave", loop: 1)
        runLoops()
        for s in [aliceInRoom, aliceElsewhere, aliceNotAllowed, bobSending, bobOther, carol, dave] { s.received.removeAll() }
        let receipts = [
            Receipt(id: 1, room: "r", messageID: "m1", authorID: "alice", userID: "bob", kind: .read, ts: 1),
            Receipt(id: 2, room: "r", messageID: "m2", authorID: "carol", userID: "bob", kind: .read, ts: 1),
        ]
        hub.publisher.publishReceipts(receipts, room: "r", kind: .read, from: "bob", audience: .devices, excludeConnection: bobSending.connectionID)
        runLoops()
        XCTAssertEqual(aliceInRoom.received.count, 1, "the author, in the room")
        XCTAssertEqual(aliceElsewhere.received.count, 1, "the author, outside the room")
        XCTAssertEqual(aliceNotAllowed.received, [], "a device whose token lacks the room never gets it")
        XCTAssertTrue(aliceInRoom.received[0].contains(#""messageId":"m1""#) && !aliceInRoom.received[0].contains("m2"), "only her messages' items")
        XCTAssertEqual(carol.received.count, 1, "the other author, her item")
        XCTAssertTrue(carol.received[0].contains("m2") && !carol.received[0].contains("m1"))
        XCTAssertEqual(bobSending.received, [], "the sending socket is excluded")
        XCTAssertEqual(bobOther.received.count, 1, "the reader's other device gets every item")
        XCTAssertTrue(bobOther.received[0].contains("m1") && bobOther.received[0].contains("m2"))
        XCTAssertEqual(dave.received, [], "another member gets nothing")
    }

    func testASingleReceiptToDevices() throws {
        let alice = RecordingSink(1), bob = RecordingSink(2), bobOther = RecordingSink(3), carol = RecordingSink(4)
        try connect(alice, user: "alice", loop: 0)
        try connect(bob, user: "bob", loop: 0)
        try connect(bobOther, user: "bob", loop: 1)
        try connect(carol, user: "carol", loop: 1)
        runLoops()
        for s in [alice, bob, bobOther, carol] { s.received.removeAll() }
        hub.publisher.publishReceipt(
            Receipt(id: 5, room: "r", messageID: "m", authorID: "alice", userID: "bob", kind: .delivered, ts: 1), audience: .devices,
            excludeConnection: bob.connectionID)
        runLoops()
        XCTAssertEqual(alice.received.count, 1)
        XCTAssertTrue(alice.received[0].hasPrefix(#"42["message:delivered",{"id":5,"#), alice.received[0])
        XCTAssertEqual(bobOther.received.count, 1)
        XCTAssertEqual(bob.received, [])
        XCTAssertEqual(carol.received, [], "a member who is neither author nor reader")
    }

    func testTheSettingParsesPerKind() throws {
        let keys = ["jwt-secret": String(repeating: "k", count: 32), "api-key": "0123456789abcdef", "admin-key": "0123456789abcdef"]
        var defaults = ConfigurationLoader.resolve(flags: keys, environment: [:], file: [:])
        XCTAssertEqual(try ConfigurationLoader.build(&defaults).0.receipts.audiences, ReceiptAudiences(delivered: .room, read: .room))
        var r = ConfigurationLoader.resolve(flags: keys.merging(["receipt-audience": "read=devices"]) { a, _ in a }, environment: [:], file: [:])
        XCTAssertEqual(try ConfigurationLoader.build(&r).0.receipts.audiences, ReceiptAudiences(delivered: .room, read: .devices))
        var bad = ConfigurationLoader.resolve(flags: keys.merging(["receipt-audience": "read=everyone"]) { a, _ in a }, environment: [:], file: [:])
        XCTAssertThrowsError(try ConfigurationLoader.build(&bad))
    }
}
