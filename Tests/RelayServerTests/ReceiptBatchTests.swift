import NIOCore
import NIOEmbedded
import RelayCore
import XCTest

@testable import RelayServer

/// `message:delivered` / `message:read` with `items`: one store hand-off, one ack listing each
/// id after the commit, forwards grouped per recipient, one event-budget token.
final class ReceiptBatchTests: XCTestCase {
    func join(_ s: Session, _ room: String = "conversation:1") throws {
        try s.send("420[\"room:join\",{\"room\":\"\(room)\"}]")
        XCTAssertTrue(try s.texts().contains { $0.hasPrefix("430[{\"ok\":true") })
    }

    func testABatchIsOneAckAndGroupedForwards() throws {
        let h = Harness()
        let bob = try h.session(), alice = try h.session(), carol = try h.session(), alicePhone = try h.session()
        for (s, user) in [(bob, "bob"), (alice, "alice"), (carol, "carol")] {
            try s.connect(user)
            try join(s)
        }
        try alicePhone.connect("alice")  // outside the room: gets only her messages' receipts
        for s in [bob, alice, carol] { _ = try s.texts() }
        let items = (1...3).map { "{\"messageId\":\"m\($0)\",\"authorId\":\"\($0 == 3 ? "carol" : "alice")\"}" }.joined(separator: ",")
        try bob.send("427[\"message:read\",{\"room\":\"conversation:1\",\"items\":[\(items),{\"messageId\":\"m1\",\"authorId\":\"alice\"}]}]")
        XCTAssertEqual(h.store.pending.count, 3, "one hand-off of three receipts (the repeated item counts once)")
        XCTAssertEqual(try bob.texts(), [], "no ack before the commit")
        for id in 1...3 { h.store.commitNext(id: Int64(id)) }
        h.loop.run()
        XCTAssertEqual(
            try bob.texts(),
            ["437[{\"ok\":true,\"items\":[{\"messageId\":\"m1\",\"id\":1},{\"messageId\":\"m2\",\"id\":2},{\"messageId\":\"m3\",\"id\":3}]}]"])
        // The room gets one event with every item; alice's phone one with her two.
        let toCarol = try carol.texts()
        XCTAssertEqual(toCarol.count, 1, "\(toCarol)")
        XCTAssertTrue(toCarol[0].hasPrefix("42[\"message:read\",{\"room\":\"conversation:1\",\"from\":\"bob\",\"kind\":\"read\",\"items\":[{\"id\":1,"))
        let toPhone = try alicePhone.texts()
        XCTAssertEqual(toPhone.count, 1, "\(toPhone)")
        XCTAssertTrue(toPhone[0].contains("\"messageId\":\"m1\"") && toPhone[0].contains("\"messageId\":\"m2\"") && !toPhone[0].contains("\"m3\""), toPhone[0])
        XCTAssertEqual(try alice.texts().count, 1, "alice in the room gets it once, from the room")
    }

    func testBatchLimitsAndShape() throws {
        let h = Harness()
        let bob = try h.session()
        try bob.connect("bob")
        try join(bob)
        let tooMany = (0...100).map { "{\"messageId\":\"m\($0)\",\"authorId\":\"a\"}" }.joined(separator: ",")
        for (i, body) in [
            "{\"room\":\"conversation:1\",\"items\":[\(tooMany)]}", "{\"room\":\"conversation:1\",\"items\":[]}",
            "{\"room\":\"conversation:1\",\"items\":[{\"messageId\":\"m\"}]}", "{\"room\":\"conversation:1\",\"items\":[1]}",
            "{\"room\":\"conversation:1\",\"messageId\":\"m\",\"authorId\":\"a\",\"items\":[{\"messageId\":\"m\",\"authorId\":\"a\"}]}",
        ].enumerated() {
            try bob.send("42\(i)[\"message:delivered\",\(body)]")
            XCTAssertTrue(try bob.texts().contains { $0.hasPrefix("43\(i)[") && $0.contains("invalid_payload") }, body)
        }
        XCTAssertEqual(h.store.pending.count, 0)
        // A batch bigger than what may still await commit is refused whole.
        let full = Harness { $0.receipts.maxPendingPerConnection = 2 }
        let carol = try full.session()
        try carol.connect("carol")
        try join(carol)
        let three = (1...3).map { "{\"messageId\":\"m\($0)\",\"authorId\":\"a\"}" }.joined(separator: ",")
        try carol.send("429[\"message:delivered\",{\"room\":\"conversation:1\",\"items\":[\(three)]}]")
        XCTAssertTrue(try carol.texts().contains { $0.hasPrefix("439[") && $0.contains("rate_limited") })
        XCTAssertEqual(full.store.pending.count, 0)
    }
}
