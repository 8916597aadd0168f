import NIOCore
import NIOEmbedded
import NIOWebSocket
import RelayCore
import XCTest

@testable import RelayServer

/// Fan-out writes whole frames made once per event: the same bytes to every recipient, past
/// NIO's frame encoder, and a client's decoder reads them as the frames the encoder would make.
final class PreparedFramesTests: XCTestCase {
    /// Decodes server→client bytes as a client would (NIO's decoder, unmasked frames allowed).
    private func decode(_ bytes: ByteBuffer) throws -> [WebSocketFrame] {
        let channel = EmbeddedChannel(handler: ByteToMessageHandler(WebSocketFrameDecoder(maxFrameSize: 1 << 20)))
        try channel.writeInbound(bytes)
        var frames: [WebSocketFrame] = []
        while let frame = try channel.readInbound(as: WebSocketFrame.self) { frames.append(frame) }
        _ = try channel.finish()
        return frames
    }

    func testHeadersUseTheShortestLengthAndRSV1ForCompressed() throws {
        for length in [0, 1, 125, 126, 127, 65_535, 65_536, 100_000] {
            var payload = ByteBuffer()
            payload.writeRepeatingByte(UInt8(ascii: "x"), count: length)
            let frames = PreparedFrames(payload: payload, compressed: payload)
            let headerBytes = length < 126 ? 2 : length <= 65_535 ? 4 : 10
            XCTAssertEqual(frames.plain.readableBytes, headerBytes + length, "length \(length)")
            XCTAssertEqual(frames.plain.getInteger(at: 0, as: UInt8.self), 0x81)
            XCTAssertEqual(frames.compressed?.getInteger(at: 0, as: UInt8.self), 0xC1)
            let decoded = try decode(frames.plain)
            XCTAssertEqual(decoded.count, 1)
            XCTAssertEqual(decoded.first?.fin, true)
            XCTAssertEqual(decoded.first?.opcode, .text)
            XCTAssertEqual(decoded.first?.rsv1, false)
            XCTAssertNil(decoded.first?.maskKey)
            XCTAssertEqual(decoded.first?.data, payload)
            XCTAssertEqual(try decode(try XCTUnwrap(frames.compressed)).first?.rsv1, true)
        }
    }

    /// The hub encodes an event straight into its frame: the packet is the bytes the Socket.IO
    /// encoder makes, and the frame is that packet behind the shortest header.
    func testAnEventIsEncodedIntoItsFrameInOneBuffer() throws {
        for length in [0, 100, 125, 126, 1_000, 65_535, 65_536, 70_000] {
            let payload: JSONValue = .object([("text", .string(String(repeating: "é", count: length / 2)))])
            let (packet, frame) = PreparedFrames.encodeEvent("message:new", payload)
            let expected = SocketPacket.eventMessage(name: "message:new", payload: payload)
            XCTAssertEqual(Array(packet.readableBytesView), expected, "length \(length)")
            let headerBytes = expected.count < 126 ? 2 : expected.count <= 65_535 ? 4 : 10
            XCTAssertEqual(frame.readableBytes, headerBytes + expected.count)
            XCTAssertEqual(frame, PreparedFrames(payload: packet, compressed: nil).plain, "the same bytes as framing the packet afterwards")
            let decoded = try decode(frame)
            XCTAssertEqual(decoded.count, 1)
            XCTAssertEqual(decoded.first?.opcode, .text)
            XCTAssertEqual(decoded.first?.fin, true)
            XCTAssertEqual(decoded.first.map { Array($0.data.readableBytesView) }, expected)
        }
    }

    func testChangingTheBytesDropsTheFrames() {
        var message = OutboundMessage(bytes: ByteBuffer(string: "42[\"a\"]")).withFrames()
        XCTAssertNotNil(message.frames)
        message.bytes = ByteBuffer(string: "42[\"b\"]")
        XCTAssertNil(message.frames, "frames made from the old bytes must never go out")
        message.prepareFrames()
        XCTAssertNotNil(message.frames)
        message.compressed = ByteBuffer(string: "zz")
        XCTAssertNil(message.frames)
        var binary = OutboundMessage(bytes: ByteBuffer(string: "451-[\"a\",{\"_placeholder\":true,\"num\":0}]"))
        binary.attachments = [ByteBuffer(string: "\u{1}\u{2}")]
        XCTAssertNil(binary.withFrames().frames, "binary events are framed per socket")
    }

    /// A socket with the real pipeline: NIO's frame encoder, then the transport.
    private func wireSession(_ h: Harness, deflate: PerMessageDeflateNegotiation? = nil) throws -> Session {
        let channel = EmbeddedChannel(loop: h.loop)
        try channel.pipeline.syncOperations.addHandler(WebSocketFrameEncoder())
        try channel.pipeline.syncOperations.addHandler(WebSocketTransport(relay: h.relay, handshake: HandshakeInfo(remoteIP: "127.0.0.1", deflate: deflate)))
        return Session(channel: channel)
    }

    /// Every buffer written since the last call (the encoder's output: headers and payloads).
    private func written(_ s: Session) throws -> [ByteBuffer] {
        s.channel.embeddedEventLoop.run()
        var out: [ByteBuffer] = []
        while let buffer = try s.channel.readOutbound(as: ByteBuffer.self) { out.append(buffer) }
        return out
    }

    private func texts(_ buffers: [ByteBuffer]) throws -> [String] {
        var all = ByteBuffer()
        for var b in buffers { all.writeBuffer(&b) }
        return try decode(all).filter { $0.opcode == .text }.map { String(buffer: $0.rsv1 ? try inflate($0.data) : $0.data) }
    }

    private func join(_ s: Session, token: String) throws {
        try s.send("40{\"token\":\"\(token)\"}")
        try s.send("421[\"room:join\",{\"room\":\"conversation:1\"}]")
        XCTAssertTrue(try texts(try written(s)).last?.hasPrefix("431[{\"ok\":true") == true)
    }

    func testAFanOutWritesOneSharedFrameToEveryRecipient() throws {
        let h = Harness()
        let sockets = try ["alice", "bob", "carol"].map { token -> Session in
            let s = try wireSession(h)
            try join(s, token: token)
            return s
        }
        _ = try sockets.map(written)
        h.relay.hub.publisher.publish(room: "conversation:1", event: EventPolicyTable.backend("message:new"), payload: .object([("text", .string("hi"))]))
        var addresses: Set<UInt> = []
        for s in sockets {
            let buffers = try written(s)
            XCTAssertEqual(buffers.count, 1, "one whole frame, one buffer")
            XCTAssertEqual(try texts(buffers), ["42[\"message:new\",{\"text\":\"hi\"}]"])
            _ = buffers[0].withUnsafeReadableBytes { addresses.insert(UInt(bitPattern: $0.baseAddress)) }
        }
        XCTAssertEqual(addresses.count, 1, "the same bytes, encoded and framed once, for every recipient")
    }

    func testDeflateClientsShareTheCompressedFrameAndOthersThePlainOne() throws {
        let h = Harness { $0.engine.deflateThresholdBytes = 64 }
        let full = try XCTUnwrap(PerMessageDeflateNegotiation.negotiate(["permessage-deflate"]))
        let small = try XCTUnwrap(PerMessageDeflateNegotiation.negotiate(["permessage-deflate; server_max_window_bits=9"]))
        let plain = try wireSession(h)
        let deflate = try [wireSession(h, deflate: full), wireSession(h, deflate: full)]
        let ownWindow = try wireSession(h, deflate: small)
        let all = [plain] + deflate + [ownWindow]
        for (s, token) in zip(all, ["alice", "bob", "carol", "alice"]) { try join(s, token: token) }
        _ = try all.map(written)
        let text = String(repeating: "reaction ", count: 40)
        h.relay.hub.publisher.publish(room: "conversation:1", event: EventPolicyTable.backend("message:new"), payload: .object([("text", .string(text))]))
        let expected = "42[\"message:new\",{\"text\":\"\(text)\"}]"
        XCTAssertEqual(try texts(try written(plain)), [expected])
        var shared: Set<UInt> = []
        for s in deflate {
            let buffers = try written(s)
            XCTAssertEqual(buffers.count, 1)
            let frame = try XCTUnwrap(try decode(buffers[0]).first)
            XCTAssertTrue(frame.rsv1)
            XCTAssertEqual(String(buffer: try inflate(frame.data)), expected)
            _ = buffers[0].withUnsafeReadableBytes { shared.insert(UInt(bitPattern: $0.baseAddress)) }
        }
        XCTAssertEqual(shared.count, 1, "compressed once, framed once")
        // A client that limited the server's window gets its own compression, through the encoder.
        let own = try written(ownWindow)
        let frame = try XCTUnwrap(try decode(own.reduce(into: ByteBuffer()) { var b = $1; $0.writeBuffer(&b) }).first)
        XCTAssertTrue(frame.rsv1)
        XCTAssertEqual(String(buffer: try inflate(frame.data)), expected)
    }

    /// Sockets that take offsets and negotiated deflate share one compressed offset variant,
    /// made by the first of them to get the event — not under the broker's stream lock, where
    /// the offset was given (`DeflaterPool.compress` asserts no lock is held).
    func testOffsetSocketsShareOneCompressedVariantMadeOutsideTheBrokersLock() throws {
        let h = Harness {
            $0.engine.deflateThresholdBytes = 64
            $0.recovery.offsetsForEverySocket = true
        }
        let full = try XCTUnwrap(PerMessageDeflateNegotiation.negotiate(["permessage-deflate"]))
        let sockets = try [wireSession(h, deflate: full), wireSession(h, deflate: full)]
        for (s, token) in zip(sockets, ["alice", "bob"]) { try join(s, token: token) }
        _ = try sockets.map(written)
        let text = String(repeating: "reaction ", count: 40)
        h.relay.hub.publisher.publish(room: "conversation:1", event: EventPolicyTable.backend("message:new"), payload: .object([("text", .string(text))]))
        var shared: Set<UInt> = []
        for s in sockets {
            let buffers = try written(s)
            XCTAssertEqual(buffers.count, 1)
            let frame = try XCTUnwrap(try decode(buffers[0]).first)
            XCTAssertTrue(frame.rsv1, "compressed")
            let event = String(buffer: try inflate(frame.data))
            XCTAssertTrue(event.hasPrefix("42[\"message:new\",{\"text\":\"\(text)\"},\""), event)
            let offset = try XCTUnwrap(event.split(separator: "\"").dropLast().last.map(String.init))
            XCTAssertNotNil(WireOffset(offset), "the offset is the event's last argument")
            _ = buffers[0].withUnsafeReadableBytes { shared.insert(UInt(bitPattern: $0.baseAddress)) }
        }
        XCTAssertEqual(shared.count, 1, "the variant is compressed once, framed once, for both")
    }

    private func inflate(_ data: ByteBuffer) throws -> ByteBuffer {
        try MessageInflater().decompress(data, maxBytes: 1 << 20, allocator: ByteBufferAllocator())
    }
}
