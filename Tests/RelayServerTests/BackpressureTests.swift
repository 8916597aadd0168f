import NIOCore
import NIOEmbedded
import NIOWebSocket
import RelayCore
import XCTest

@testable import RelayServer

/// The outbound queue of a socket that cannot be written to: coalescing over the soft limit,
/// close 4008 over the hard limit, order kept for the rest.
final class BackpressureTests: XCTestCase {
    func joined(_ h: Harness, _ token: String) throws -> Session {
        let s = try h.session()
        try s.connect(token)
        try s.send("420[\"room:join\",{\"room\":\"conversation:1\"}]")
        _ = try s.texts()
        return s
    }

    func testOnlyTheNewestLocationPerSenderIsKeptWhileBlocked() throws {
        let h = Harness { $0.connections.outboundSoftLimitBytes = 0 }
        let bob = try joined(h, "bob")
        let alice = try joined(h, "alice")
        _ = try bob.texts()
        try alice.send("421[\"location:share-live\",{\"room\":\"conversation:1\",\"durationSec\":60}]")
        bob.channel.isWritable = false
        bob.channel.pipeline.fireChannelWritabilityChanged()  // as a real channel does when it crosses the high-water mark
        for i in 1...5 {
            try alice.send("42[\"location:update\",{\"room\":\"conversation:1\",\"lat\":\(i),\"lng\":2}]")
        }
        try alice.send("42[\"message:reaction\",{\"room\":\"conversation:1\",\"messageId\":\"m\",\"emoji\":\"👍\",\"action\":\"add\"}]")
        try alice.send("42[\"location:update\",{\"room\":\"conversation:1\",\"lat\":6,\"lng\":2}]")
        XCTAssertFalse(try bob.texts().contains { $0.contains("location:update") }, "nothing written while blocked")

        bob.channel.isWritable = true
        bob.channel.pipeline.fireChannelWritabilityChanged()
        let got = try bob.texts()
        let updates = got.filter { $0.contains("location:update") }
        XCTAssertEqual(updates.count, 1, "\(got)")
        XCTAssertTrue(updates[0].contains("\"lat\":6"), updates[0])
        // The reaction is not coalescible and keeps its place after the (replaced) update.
        let reaction = try XCTUnwrap(got.firstIndex { $0.contains("message:reaction") })
        let update = try XCTUnwrap(got.firstIndex { $0.contains("location:update") })
        XCTAssertLessThan(update, reaction)
    }

    func testHardLimitClosesTheSlowSocketWith4008AndSparesTheOthers() throws {
        let h = Harness { $0.connections.outboundSoftLimitBytes = 100; $0.connections.outboundHardLimitBytes = 2000 }
        let slow = try joined(h, "bob")
        let alice = try joined(h, "alice")
        let carol = try joined(h, "carol")
        _ = try slow.texts()
        _ = try carol.texts()
        slow.channel.isWritable = false
        slow.channel.pipeline.fireChannelWritabilityChanged()  // as a real channel does when it crosses the high-water mark
        for i in 1...40 {
            try alice.send("42[\"note:new\",{\"room\":\"conversation:1\",\"n\":\(i),\"pad\":\"\(String(repeating: "p", count: 60))\"}]")
        }
        let frames = try slow.frames()
        let close = try XCTUnwrap(frames.first { $0.opcode == .connectionClose })
        var data = close.data
        XCTAssertEqual(data.readInteger(as: UInt16.self), CloseCode.slowConsumer)
        // Carol reads normally: every message, in order.
        let numbers = try carol.texts().filter { $0.contains("note:new") }.compactMap { text -> Int? in
            guard let r = text.range(of: "\"n\":") else { return nil }
            return Int(text[r.upperBound...].prefix { $0.isNumber })
        }
        XCTAssertEqual(numbers, Array(1...40))
    }

    func testReceiptForwardsAreNeverCoalesced() throws {
        var q = OutboundQueue<OutboundMessage>(softLimitBytes: 0, hardLimitBytes: 10_000, maxCount: 100)
        let a = OutboundMessage(bytes: ByteBuffer(string: "42[\"message:read\",{\"id\":1}]"), durable: true)
        let b = OutboundMessage(bytes: ByteBuffer(string: "42[\"message:read\",{\"id\":2}]"), durable: true)
        XCTAssertEqual(q.enqueue(a, bytes: a.bytes.readableBytes, key: a.coalescingKey), .queued)
        XCTAssertEqual(q.enqueue(b, bytes: b.bytes.readableBytes, key: b.coalescingKey), .queued)
        XCTAssertEqual(q.count, 2)
    }
}
