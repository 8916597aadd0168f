import NIOCore
import NIOEmbedded
import NIOWebSocket
import RelayCore
import XCTest

@testable import RelayServer

/// A receipt is acknowledged only after its transaction committed, never before.
final class ReceiptAckTests: XCTestCase {
    func join(_ s: Session, _ room: String = "conversation:1") throws {
        try s.send("420[\"room:join\",{\"room\":\"\(room)\"}]")
        XCTAssertTrue(try s.texts().contains { $0.hasPrefix("430[{\"ok\":true") })
    }

    func testAckWaitsForCommitThenCarriesCursor() throws {
        let h = Harness()
        let bob = try h.session()
        bob.channel.pipeline.fireChannelActive()
        try bob.connect("bob")
        try join(bob)
        let alice = try h.session()
        try alice.connect("alice")
        try join(alice)
        _ = try bob.texts()

        try bob.send("425[\"message:delivered\",{\"room\":\"conversation:1\",\"messageId\":\"m1\",\"authorId\":\"alice\"}]")
        XCTAssertEqual(h.store.pending.count, 1, "the receipt went to the store")
        XCTAssertEqual(try bob.texts(), [], "no ack before the commit")
        XCTAssertEqual(try alice.texts(), [], "no forward before the commit")

        h.store.commitNext(id: 42)
        h.loop.run()
        XCTAssertEqual(try bob.texts(), ["435[{\"ok\":true,\"id\":42}]"])
        let forwarded = try alice.texts()
        XCTAssertEqual(forwarded.count, 1)
        XCTAssertTrue(forwarded[0].hasPrefix("42[\"message:delivered\",{\"id\":42,"), forwarded[0])
    }

    func testFailedCommitAnswersStoreUnavailableNeverOk() throws {
        let h = Harness()
        let bob = try h.session()
        try bob.connect("bob")
        try join(bob)
        try bob.send("426[\"message:read\",{\"room\":\"conversation:1\",\"messageId\":\"m1\",\"authorId\":\"alice\"}]")
        h.store.failNext()
        h.loop.run()
        let texts = try bob.texts()
        XCTAssertEqual(texts.count, 1)
        XCTAssertTrue(texts[0].hasPrefix("436[{\"ok\":false,\"error\":{\"code\":\"store_unavailable\""), texts[0])
    }

    func testReceiptForRoomNotJoinedIsRefused() throws {
        let h = Harness()
        let bob = try h.session()
        try bob.connect("bob")
        try bob.send("427[\"message:read\",{\"room\":\"conversation:9\",\"messageId\":\"m1\",\"authorId\":\"alice\"}]")
        XCTAssertEqual(h.store.pending.count, 0)
        XCTAssertTrue(try bob.texts()[0].hasPrefix("437[{\"ok\":false,\"error\":{\"code\":\"not_in_room\""))
    }

    func testInvalidReceiptPayloadIsRefused() throws {
        let h = Harness()
        let bob = try h.session()
        try bob.connect("bob")
        try join(bob)
        try bob.send("428[\"message:read\",{\"room\":\"conversation:1\",\"messageId\":\"\"}]")
        XCTAssertEqual(h.store.pending.count, 0)
        XCTAssertTrue(try bob.texts()[0].hasPrefix("438[{\"ok\":false,\"error\":{\"code\":\"invalid_payload\""))
    }

    func delivered(_ s: Session, ack: Int, message: String) throws {
        try s.send("42\(ack)[\"message:delivered\",{\"room\":\"conversation:1\",\"messageId\":\"\(message)\",\"authorId\":\"alice\"}]")
    }

    /// Acks of receipts committed together are written at once and flushed once, after the
    /// tasks already queued on the loop.
    func testAcksOfOneCommitLeaveInOneFlush() throws {
        let h = Harness()
        let bob = try h.session()
        try bob.connect("bob")
        try join(bob)
        try delivered(bob, ack: 1, message: "m1")
        try delivered(bob, ack: 2, message: "m2")
        h.store.commitNext(id: 1)
        h.store.commitNext(id: 2)
        XCTAssertNil(try bob.channel.readOutbound(as: WebSocketFrame.self), "written, not flushed yet")
        XCTAssertEqual(try bob.texts(), ["431[{\"ok\":true,\"id\":1}]", "432[{\"ok\":true,\"id\":2}]"])
    }

    /// The bound counts a receipt until its commit or its failure; an ack that completes after
    /// the socket closed is not sent.
    func testTheBoundCountsUntilTheStoreAnswersAndNoAckFollowsAClose() throws {
        let h = Harness { $0.receipts.maxPendingPerConnection = 1 }
        let bob = try h.session()
        try bob.connect("bob")
        try join(bob)
        let socket = try XCTUnwrap(bob.channel.pipeline.syncOperations.handler(type: WebSocketTransport.self).session)
        try delivered(bob, ack: 1, message: "m1")
        XCTAssertEqual(socket.receipts.pending, 1)
        try delivered(bob, ack: 2, message: "m2")
        h.store.failNext()
        XCTAssertEqual(socket.receipts.pending, 0)
        let texts = try bob.texts()
        XCTAssertEqual(texts.count, 2, "\(texts)")
        XCTAssertTrue(texts[0].hasPrefix("432[{\"ok\":false,\"error\":{\"code\":\"rate_limited\""), texts[0])
        XCTAssertTrue(texts[1].hasPrefix("431[{\"ok\":false,\"error\":{\"code\":\"store_unavailable\""), texts[1])
        try delivered(bob, ack: 3, message: "m3")
        XCTAssertEqual(socket.receipts.pending, 1, "a failure freed its place")
        socket.close(code: CloseCode.kicked, reason: "kicked")
        XCTAssertEqual(try bob.closeCode(), CloseCode.kicked)
        h.store.commitNext(id: 3)
        XCTAssertEqual(socket.receipts.pending, 0)
        XCTAssertEqual(try bob.texts(), [], "closed: no ack")
    }
}
