import NIOCore
import NIOEmbedded
import NIOWebSocket
import RelayCore
import XCTest

@testable import RelayServer

/// The per-connection bounds that keep a hostile client from growing the relay's memory,
/// checked on an `EmbeddedChannel` (the e2e suite replays the same attacks on a real process).
final class HostileInputTests: XCTestCase {
    func testMessagesBeforeConnectAreHeldToTheSmallLimit() throws {
        let h = Harness { $0.engine.maxConnectPayload = 1024; $0.engine.maxPayload = 100_000 }
        let s = try h.session()
        _ = try s.frames()
        try s.send("4" + String(repeating: "x", count: 1500))
        XCTAssertEqual(try s.closeCode(), CloseCode.messageTooBig)
    }

    func testTheFullLimitAppliesOnceConnected() throws {
        let h = Harness { $0.engine.maxConnectPayload = 1024; $0.engine.maxPayload = 100_000 }
        let s = try h.session()
        try s.connect("alice")
        try s.send("42[\"room:join\",{\"room\":\"conversation:1\",\"pad\":\"" + String(repeating: "x", count: 5000) + "\"}]")
        XCTAssertNil(try s.closeCode())
    }

    func testErrorRepliesSpendABudgetThenClose1008() throws {
        let h = Harness {
            $0.events.errorReplies = .init(perSecond: 1, burst: 3)
            $0.events.eventsPerSecond = .init(perSecond: 1000, burst: 1000)
            $0.events.eventsPerSecondByClass[.control] = .init(perSecond: 1000, burst: 1000)
        }
        let s = try h.session()
        try s.connect("alice")
        for i in 1...3 { try s.send("42\(i)[\"Bad_Name\",{}]") }
        XCTAssertEqual(try s.texts().count, 3)
        try s.send("424[\"Bad_Name\",{}]")
        let frames = try s.frames()
        XCTAssertTrue(frames.filter { $0.opcode == .text }.isEmpty, "no fourth error reply")
        var close = try XCTUnwrap(frames.first { $0.opcode == .connectionClose }).data
        XCTAssertEqual(close.readInteger(as: UInt16.self), CloseCode.policyViolation)
    }

    func testPingsAreAnsweredOnceWhileTheSocketDoesNotDrain() throws {
        // A packet budget large enough for the 1000 pings: this test is about the answers.
        let h = Harness { $0.events.inbound.packets = .init(perSecond: 10_000, burst: 10_000) }
        let s = try h.session()
        try s.connect("alice")
        s.channel.isWritable = false
        s.channel.pipeline.fireChannelWritabilityChanged()  // as a real channel does when it crosses the high-water mark
        s.channel.pipeline.fireChannelWritabilityChanged()
        for i in 0..<1000 { try s.sendBytes(Array("ping \(i)".utf8), opcode: .ping) }
        XCTAssertTrue(try s.frames().isEmpty, "nothing written while the peer does not read")
        s.channel.isWritable = true
        s.channel.pipeline.fireChannelWritabilityChanged()
        let pongs = try s.frames().filter { $0.opcode == .pong }
        XCTAssertEqual(pongs.map { String(buffer: $0.data) }, ["ping 999"], "only the latest ping is answered")
    }

    func testWebSocketPingFramesSpendThePacketBudgetBeforeAndAfterConnect() throws {
        for loggedIn in [false, true] {
            let h = Harness()
            let s = try h.session()
            if loggedIn { try s.connect("alice") }
            _ = try s.frames()
            for i in 0..<600 { try s.sendBytes(Array("ping \(i)".utf8), opcode: .ping) }
            XCTAssertEqual(try s.closeCode(), CloseCode.policyViolation, "loggedIn=\(loggedIn)")
        }
    }

    func testTheCodecRefusesALargeFrameAtItsHeader() throws {
        final class Recorder: ChannelInboundHandler {
            typealias InboundIn = WebSocketFrame
            var frames = 0
            var errors: [Error] = []
            func channelRead(context: ChannelHandlerContext, data: NIOAny) { frames += 1 }
            func errorCaught(context: ChannelHandlerContext, error: Error) { errors.append(error) }
        }
        let recorder = Recorder()
        let codec = WebSocketFrameCodec(maxFrameSize: 1 << 20)
        codec.frameLimit = 16_384
        let channel = EmbeddedChannel(handlers: [codec, recorder])
        // A small frame passes.
        var small = channel.allocator.buffer(capacity: 16)
        small.writeBytes([0x81, 0x82, 1, 2, 3, 4, 0x41, 0x42])
        try channel.writeInbound(small)
        XCTAssertEqual(recorder.frames, 1)
        // The header of a 1 MB frame (the decoder itself would take it) is enough to refuse it.
        var big = channel.allocator.buffer(capacity: 16)
        big.writeBytes([0x81, 0xFF, 0, 0, 0, 0, 0, 0x0F, 0x42, 0x40, 1, 2, 3, 4, 0x41])
        try channel.writeInbound(big)
        XCTAssertEqual(recorder.errors.count, 1)
        XCTAssertEqual(recorder.errors.first as? NIOWebSocketError, .invalidFrameLength)
        XCTAssertEqual(recorder.frames, 1)
        _ = try? channel.finish()
    }

    func testReceiptsAwaitingCommitAreBoundedPerConnection() throws {
        let h = Harness { $0.receipts.maxPendingPerConnection = 2 }
        let s = try h.session()
        try s.connect("alice")
        try s.send("421[\"room:join\",{\"room\":\"conversation:1\"}]")
        _ = try s.texts()
        for i in 2...4 { try s.send("42\(i)[\"message:delivered\",{\"room\":\"conversation:1\",\"messageId\":\"m\(i)\",\"authorId\":\"bob\"}]") }
        let texts = try s.texts()
        XCTAssertEqual(texts.count, 1, "two wait for their commit, the third is refused: \(texts)")
        XCTAssertTrue(texts[0].hasPrefix("434[{\"ok\":false,\"error\":{\"code\":\"rate_limited\""), texts[0])
        h.store.commitNext(id: 1)
        _ = try s.texts()
        try s.send("425[\"message:delivered\",{\"room\":\"conversation:1\",\"messageId\":\"m5\",\"authorId\":\"bob\"}]")
        XCTAssertTrue(try s.texts().isEmpty, "a commit frees a place")
    }

    func testReceiptsPerUserAreBoundedAcrossConnections() throws {
        let h = Harness { $0.receipts.perUser = .init(perSecond: 1, burst: 2) }
        let a = try h.session()
        let b = try h.session()
        for s in [a, b] {
            try s.connect("alice")
            try s.send("421[\"room:join\",{\"room\":\"conversation:1\"}]")
            _ = try s.texts()
        }
        try a.send("422[\"message:read\",{\"room\":\"conversation:1\",\"messageId\":\"m1\",\"authorId\":\"bob\"}]")
        try b.send("422[\"message:read\",{\"room\":\"conversation:1\",\"messageId\":\"m2\",\"authorId\":\"bob\"}]")
        XCTAssertTrue(try a.texts().isEmpty)
        XCTAssertTrue(try b.texts().isEmpty)
        // The user's third receipt, on either socket, is over the quota until it refills.
        try b.send("423[\"message:read\",{\"room\":\"conversation:1\",\"messageId\":\"m3\",\"authorId\":\"bob\"}]")
        let refused = try b.texts()
        XCTAssertEqual(refused.count, 1)
        XCTAssertTrue(refused[0].hasPrefix("433[{\"ok\":false,\"error\":{\"code\":\"rate_limited\""), refused[0])
        h.advance(ms: 1000)
        try b.send("424[\"message:read\",{\"room\":\"conversation:1\",\"messageId\":\"m4\",\"authorId\":\"bob\"}]")
        XCTAssertTrue(try b.texts().isEmpty, "refilled after a second")
    }
}
