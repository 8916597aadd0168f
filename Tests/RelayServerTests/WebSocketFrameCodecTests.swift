import NIOCore
import NIOEmbedded
import NIOWebSocket
import RelayCore
import XCTest

@testable import RelayServer

/// `WebSocketFrameCodec` alone (frames cut from reads however the bytes are split, the UTF-8
/// check, errors; frames written as NIO's encoder writes them), and in the pipeline
/// `RelayServer.configure` builds for an upgraded socket.
final class WebSocketFrameCodecTests: XCTestCase {
    /// Records what the reader hands on; with `inject`, feeds the pipeline more bytes from inside
    /// its first frame (a read arriving while frames are handed on).
    private final class Recorder: ChannelInboundHandler {
        typealias InboundIn = WebSocketFrame
        var frames: [WebSocketFrame] = []
        var errors: [any Error] = []
        var inject: ByteBuffer?

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            frames.append(unwrapInboundIn(data))
            if let bytes = inject {
                inject = nil
                context.pipeline.syncOperations.fireChannelRead(NIOAny(bytes))
            }
        }

        func errorCaught(context: ChannelHandlerContext, error: any Error) {
            errors.append(error)
        }
    }

    private func frame(_ payload: [UInt8], opcode: UInt8 = 0x1, fin: Bool = true) -> [UInt8] {
        let key: [UInt8] = [7, 1, 9, 3]
        var out: [UInt8] = [(fin ? 0x80 : 0) | opcode]
        switch payload.count {
        case ..<126: out.append(0x80 | UInt8(payload.count))
        case ..<65_536: out += [0x80 | 126, UInt8(payload.count >> 8), UInt8(payload.count & 0xFF)]
        default: out.append(0x80 | 127); for i in (0..<8).reversed() { out.append(UInt8((payload.count >> (i * 8)) & 0xFF)) }
        }
        out += key
        for (i, byte) in payload.enumerated() { out.append(byte ^ key[i % 4]) }
        return out
    }

    private func text(_ f: WebSocketFrame) -> String {
        String(decoding: f.unmaskedData.readableBytesView, as: UTF8.self)
    }

    private func channel(maxFrameSize: Int = 1_000) throws -> (EmbeddedChannel, Recorder) {
        let recorder = Recorder()
        let channel = EmbeddedChannel(handlers: [WebSocketFrameCodec(maxFrameSize: maxFrameSize), recorder])
        return (channel, recorder)
    }

    private func write(_ channel: EmbeddedChannel, _ bytes: [UInt8]) throws {
        try channel.writeInbound(ByteBuffer(bytes: bytes))
    }

    func testFramesAreCutHoweverTheBytesAreSplit() throws {
        let stream = frame(Array("hello".utf8)) + frame(Array(repeating: UInt8(ascii: "a"), count: 300)) + frame([], opcode: 0x9)
            + frame(Array("é".utf8), fin: false) + frame([], opcode: 0x0)
        for chunk in [1, 2, 3, 7, 64, stream.count] {
            let (channel, recorder) = try channel()
            var index = 0
            while index < stream.count {
                try write(channel, Array(stream[index..<min(index + chunk, stream.count)]))
                index += chunk
            }
            XCTAssertEqual(recorder.frames.map(\.opcode), [.text, .text, .ping, .text, .continuation], "chunks of \(chunk)")
            XCTAssertEqual(recorder.frames.first.map(text), "hello")
            XCTAssertEqual(recorder.frames.dropFirst().first?.length, 300)
            XCTAssertEqual(recorder.frames.map(\.fin), [true, true, true, false, true])
            XCTAssertTrue(recorder.errors.isEmpty)
            XCTAssertNoThrow(try channel.finish())
        }
    }

    func testAReadDuringAFrameIsDecodedAfterTheFramesBeforeIt() throws {
        let (channel, recorder) = try channel()
        recorder.inject = ByteBuffer(bytes: frame(Array("c".utf8)))
        try write(channel, frame(Array("a".utf8)) + frame(Array("b".utf8)))
        XCTAssertEqual(recorder.frames.map(text), ["a", "b", "c"])
    }

    func testInvalidTextIsRefusedAtItsFirstBadByteAndNothingMoreIsRead() throws {
        let (channel, recorder) = try channel()
        // The frame declares 10 bytes; only 3 arrive, the third invalid: refused before it is whole.
        let whole = frame([UInt8(ascii: "o"), UInt8(ascii: "k"), 0xC3, 0x28, 0, 0, 0, 0, 0, 0])
        try write(channel, Array(whole.prefix(2 + 4 + 4)))
        XCTAssertTrue(recorder.frames.isEmpty)
        XCTAssertEqual(recorder.errors.count, 1)
        XCTAssertTrue(recorder.errors.first is WebSocketFrameCodec.InvalidText)
        try write(channel, frame(Array("later".utf8)))
        XCTAssertTrue(recorder.frames.isEmpty, "nothing after invalid text")
        XCTAssertEqual(recorder.errors.count, 1)
    }

    func testAFrameOverTheLimitFailsAndLaterReadsReportTheError() throws {
        let (channel, recorder) = try channel(maxFrameSize: 100)
        try write(channel, frame(Array(repeating: UInt8(ascii: "x"), count: 101)))
        XCTAssertEqual(recorder.errors.first as? NIOWebSocketError, .invalidFrameLength)
        try write(channel, frame(Array("x".utf8)))
        guard case .dataReceivedInErrorState? = recorder.errors.last as? ByteToMessageDecoderError else {
            return XCTFail("expected dataReceivedInErrorState, got \(recorder.errors)")
        }
        XCTAssertTrue(recorder.frames.isEmpty)
    }

    func testFramesAreWrittenAsNIOsEncoderWritesThem() throws {
        func bytes(_ frame: WebSocketFrame, _ channel: EmbeddedChannel) throws -> [UInt8] {
            try channel.writeAndFlush(frame).wait()
            var out: [UInt8] = []
            while let buffer = try channel.readOutbound(as: ByteBuffer.self) { out += Array(buffer.readableBytesView) }
            return out
        }
        let ours = EmbeddedChannel(handler: WebSocketFrameCodec(maxFrameSize: 1 << 20))
        let nio = EmbeddedChannel(handler: WebSocketFrameEncoder())
        for length in [0, 1, 125, 126, 127, 1_024, 1_025, 65_535, 65_536, 70_000] {
            for (opcode, fin, rsv1, mask) in [(WebSocketOpcode.text, true, false, false), (.binary, false, true, false), (.ping, true, false, true), (.continuation, true, false, true)] {
                var payload = ByteBuffer()
                payload.writeBytes((0..<length).map { UInt8(truncatingIfNeeded: $0) })
                let key: WebSocketMaskingKey? = mask ? WebSocketMaskingKey([9, 8, 7, 6]) : nil
                let frame = WebSocketFrame(fin: fin, rsv1: rsv1, opcode: opcode, maskKey: key, data: payload)
                XCTAssertEqual(try bytes(frame, ours), try bytes(frame, nio), "\(opcode) length \(length) masked \(mask)")
            }
        }
        var ext = ByteBuffer(bytes: [1, 2, 3])
        let withExtension = WebSocketFrame(fin: true, opcode: .binary, maskKey: WebSocketMaskingKey([1, 2, 3, 4]), data: ByteBuffer(bytes: [4, 5, 6, 7, 8]), extensionData: ext)
        ext.clear()
        XCTAssertEqual(try bytes(withExtension, ours), try bytes(withExtension, nio), "extension data")
    }

    // MARK: In the pipeline of an upgraded socket

    /// Server→client bytes as a client reads them.
    private func serverFrames(_ bytes: [UInt8]) throws -> [WebSocketFrame] {
        let channel = EmbeddedChannel(handler: ByteToMessageHandler(WebSocketFrameDecoder(maxFrameSize: 1 << 20)))
        try channel.writeInbound(ByteBuffer(bytes: bytes))
        var frames: [WebSocketFrame] = []
        while let frame = try channel.readInbound(as: WebSocketFrame.self) { frames.append(frame) }
        return frames
    }

    private func outbound(_ channel: EmbeddedChannel) throws -> [UInt8] {
        channel.embeddedEventLoop.run()
        var out: [UInt8] = []
        while let buffer = try channel.readOutbound(as: ByteBuffer.self) { out += Array(buffer.readableBytesView) }
        return out
    }

    /// A socket upgraded through `RelayServer.configure`, its 101 answer read.
    private func upgraded(_ harness: Harness) throws -> EmbeddedChannel {
        let channel = EmbeddedChannel(loop: harness.loop)
        try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 40000)).wait()
        try RelayServer.configure(channel: channel, relay: harness.relay)
        let request = "GET /socket.io/?EIO=4&transport=websocket HTTP/1.1\r\nHost: relay\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            + "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
        // The first frame comes in the same read as the request: it waits for the pipeline.
        try write(channel, Array(request.utf8) + frame(Array("2".utf8)))
        let answer = try outbound(channel)
        let text = String(decoding: answer, as: UTF8.self)
        XCTAssertTrue(text.hasPrefix("HTTP/1.1 101 Switching Protocols"), text)
        XCTAssertNil(try? channel.pipeline.syncOperations.handler(type: ByteToMessageHandler<WebSocketFrameDecoder>.self), "no NIO decoder")
        XCTAssertNil(try? channel.pipeline.syncOperations.handler(type: WebSocketFrameEncoder.self), "no NIO encoder")
        let accept = text.split(separator: "\r\n").first { $0.lowercased().hasPrefix("sec-websocket-accept:") }
        XCTAssertEqual(accept.map { String($0.dropFirst("sec-websocket-accept:".count)).trimmingCharacters(in: .whitespaces) }, "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=", "RFC 6455's example")
        return channel
    }

    func testAnUpgradedSocketReadsFramesThroughTheReader() throws {
        let harness = Harness()
        let channel = try upgraded(harness)
        _ = try channel.pipeline.syncOperations.handler(type: WebSocketFrameCodec.self)
        XCTAssertEqual(try channel.pipeline.syncOperations.handler(type: WebSocketFrameCodec.self).frameLimit, 16_384, "pre-authentication frames")
        // CONNECT split over two reads.
        let connect = frame(Array("40{\"token\":\"alice\"}".utf8))
        try write(channel, Array(connect.prefix(5)))
        try write(channel, Array(connect.dropFirst(5)))
        let texts = try serverFrames(try outbound(channel)).map { String(buffer: $0.data) }
        XCTAssertTrue(texts.contains { $0.hasPrefix("40{\"sid\":") }, "\(texts)")
        XCTAssertEqual(try channel.pipeline.syncOperations.handler(type: WebSocketFrameCodec.self).frameLimit, 1_000_000, "max-payload once connected")
        // Invalid text, after CONNECT: 1007.
        try write(channel, frame([UInt8(ascii: "4"), UInt8(ascii: "2"), 0xFF]))
        let close = try serverFrames(try outbound(channel)).first { $0.opcode == .connectionClose }
        var data = try XCTUnwrap(close).data
        XCTAssertEqual(data.readInteger(as: UInt16.self), CloseCode.invalidPayloadData)
    }

    private func closeCode(_ channel: EmbeddedChannel) throws -> UInt16? {
        guard let close = try serverFrames(try outbound(channel)).first(where: { $0.opcode == .connectionClose }) else { return nil }
        var data = close.data
        return data.readInteger(as: UInt16.self)
    }

    /// After a `41` the socket is unauthenticated again: the codec refuses a frame that declares
    /// more than the pre-authentication limit, at its header, as before the first CONNECT — even
    /// when the `41` and that header come in one read.
    func testADisconnectRestoresThePreAuthenticationFrameLimit() throws {
        for sameRead in [false, true] {
            let harness = Harness { $0.engine.maxConnectPayload = 16_384 }
            let channel = try upgraded(harness)
            try write(channel, frame(Array("40{\"token\":\"alice\"}".utf8)))
            _ = try outbound(channel)
            let codec = try channel.pipeline.syncOperations.handler(type: WebSocketFrameCodec.self)
            XCTAssertEqual(codec.frameLimit, 1_000_000, "connected")
            // A header that declares 900 KB: refused before any of its payload is buffered.
            let header: [UInt8] = [0x81, 0x80 | 127, 0, 0, 0, 0, 0, 0x0D, 0xBB, 0xA0, 7, 1, 9, 3]
            if sameRead {
                try write(channel, frame(Array("41".utf8)) + header)
            } else {
                try write(channel, frame(Array("41".utf8)))
                _ = try outbound(channel)
                XCTAssertEqual(codec.frameLimit, 16_384, "after 41")
                try write(channel, header)
            }
            XCTAssertEqual(try closeCode(channel), CloseCode.messageTooBig, "41 and the header in one read: \(sameRead)")
        }
    }

    /// Empty continuation frames complete no message, but each spends the packet budget: a flood
    /// of them is closed 1008, before and after CONNECT (the issue measured 3.5 million taken).
    func testEmptyContinuationsSpendThePacketBudget() throws {
        for connected in [false, true] {
            let harness = Harness { $0.events.inbound.packets = .init(perSecond: 250, burst: 500) }
            let channel = try upgraded(harness)
            if connected {
                try write(channel, frame(Array("40{\"token\":\"alice\"}".utf8)))
                _ = try outbound(channel)
            }
            try write(channel, frame(Array(repeating: UInt8(ascii: "a"), count: 1000), fin: false))
            var sent = 0
            var code: UInt16?
            while code == nil, sent < 5_000 {
                // 100 empty continuations a read.
                try write(channel, Array((0..<100).map { _ in frame([], opcode: 0x0, fin: false) }.joined()))
                sent += 100
                code = try closeCode(channel)
            }
            XCTAssertEqual(code, CloseCode.policyViolation, "connected: \(connected)")
            XCTAssertLessThanOrEqual(sent, 600, "closed at the burst (500 packets), connected: \(connected)")
        }
    }

    /// Once the relay's close frame is out, what the peer still sends is dropped undecoded, and a
    /// peer that keeps sending past a small allowance is no longer read at all (it is not reset:
    /// that would lose the close frame in its receive buffer) — a flood after the close cannot
    /// hold the loop; the transport's close deadline ends the connection.
    func testAfterItsCloseTheRelayReadsOnlyABoundedTail() throws {
        let (channel, recorder) = try channel()
        try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 40000)).wait()
        let codec = try channel.pipeline.syncOperations.handler(type: WebSocketFrameCodec.self)
        let empty = frame([], opcode: 0x0, fin: false)
        try write(channel, frame(Array("4".utf8), fin: false) + empty)
        XCTAssertEqual(recorder.frames.count, 2, "decoded while reading")
        codec.discardInput(allowance: 6_000)
        try write(channel, Array(repeating: empty, count: 900).flatMap { $0 })  // 5 400 B: within it
        XCTAssertEqual(recorder.frames.count, 2, "dropped undecoded after the close")
        XCTAssertTrue(channel.isActive, "the peer may still send its close frame")
        XCTAssertFalse(codec.holdsInput)
        try write(channel, Array(repeating: empty, count: 200).flatMap { $0 })  // past it
        XCTAssertTrue(codec.holdsInput, "a peer that floods after the close is no longer read")
        XCTAssertTrue(channel.isActive, "and not reset: its close frame may still be in its buffer")
        try write(channel, Array(repeating: empty, count: 2_000).flatMap { $0 })
        XCTAssertEqual(recorder.frames.count, 2)
    }

    func testAnUpgradedSocketIsCountedUntilItCloses() throws {
        let harness = Harness()
        let admission = harness.relay.admission
        let channel = try upgraded(harness)
        XCTAssertEqual(admission.openConnections, 1, "the HTTP handler handed the admission over, not back")
        XCTAssertEqual(admission.connections(ip: "127.0.0.1"), 1)
        try channel.close().wait()
        harness.loop.run()
        XCTAssertEqual(admission.openConnections, 0, "the codec gave it back")
        XCTAssertEqual(admission.connections(ip: "127.0.0.1"), 0)
    }

    func testBeforeConnectAFrameOverTheSmallLimitCloses1009() throws {
        let harness = Harness { $0.engine.maxConnectPayload = 100 }
        let channel = try upgraded(harness)
        try write(channel, frame(Array(repeating: UInt8(ascii: "x"), count: 101)))
        let close = try serverFrames(try outbound(channel)).first { $0.opcode == .connectionClose }
        var data = try XCTUnwrap(close).data
        XCTAssertEqual(data.readInteger(as: UInt16.self), CloseCode.messageTooBig)
    }

    /// The relay's close (RFC 6455 §7.1.1): its close frame, then no FIN until the peer's close
    /// frame comes — a client that sees FIN right behind the close frame may report the
    /// connection gone before the frames ahead of it — then the connection closes at once. A
    /// peer that never answers is closed at the 2 s deadline; one whose close frame came first
    /// is closed as soon as the relay's is written.
    func testTheRelaysCloseWaitsForThePeersCloseFrame() throws {
        for split in [false, true] {
            let harness = Harness()
            let channel = try upgraded(harness)
            try write(channel, frame(Array("40{\"token\":\"alice\"}".utf8)))
            _ = try outbound(channel)
            try write(channel, frame([UInt8(ascii: "4"), UInt8(ascii: "2"), 0xFF]))
            XCTAssertEqual(try closeCode(channel), CloseCode.invalidPayloadData)
            XCTAssertTrue(channel.isActive, "open until the peer's close frame")
            let answer = frame([0x03, 0xEF], opcode: 0x8)
            if split {
                try write(channel, Array(answer.prefix(3)))
                channel.embeddedEventLoop.run()
                XCTAssertTrue(channel.isActive, "half a close frame is not one")
                try write(channel, Array(answer.dropFirst(3)))
            } else {
                try write(channel, answer)
            }
            channel.embeddedEventLoop.run()
            XCTAssertFalse(channel.isActive, "closed once the peer's close frame came")
        }
    }

    func testAPeerThatNeverAnswersIsClosedAtTheDeadline() throws {
        let harness = Harness()
        let channel = try upgraded(harness)
        try write(channel, frame([UInt8(ascii: "4"), UInt8(ascii: "2"), 0xFF]))
        XCTAssertEqual(try closeCode(channel), CloseCode.invalidPayloadData)
        // Frames that are not a close frame do not end the wait.
        try write(channel, frame(Array("2".utf8)) + frame([1], opcode: 0x9))
        harness.advance(ms: 1_999)
        XCTAssertTrue(channel.isActive)
        harness.advance(ms: 1)
        XCTAssertFalse(channel.isActive, "the 2 s deadline")
    }

    func testAPeerThatClosedFirstIsClosedOnceTheRelaysCloseFrameIsOut() throws {
        let harness = Harness()
        let channel = try upgraded(harness)
        try write(channel, frame([0x03, 0xE8], opcode: 0x8))
        XCTAssertEqual(try closeCode(channel), 1000, "the relay answers with the peer's code")
        XCTAssertFalse(channel.isActive, "the handshake is complete")
    }

    /// After a broken frame (one that declares more than the limit) the relay's close frame goes
    /// out and what the peer still sends is dropped, never raised as an error that would close
    /// the connection with input unread (a reset, which loses the close frame in the peer's
    /// kernel); the deadline ends it.
    func testInputAfterABrokenFrameIsDroppedUntilTheDeadline() throws {
        let harness = Harness()
        let channel = try upgraded(harness)
        let header: [UInt8] = [0x81, 0x80 | 127, 0, 0, 0, 0, 0, 0x0F, 0x42, 0x40, 7, 1, 9, 3]
        try write(channel, header + Array(repeating: 0x41, count: 2_000))
        XCTAssertEqual(try closeCode(channel), CloseCode.messageTooBig)
        for _ in 0..<10 { try write(channel, Array(repeating: 0x41, count: 4_000)) }
        channel.embeddedEventLoop.run()
        XCTAssertTrue(channel.isActive, "no close on the bytes that follow")
        harness.advance(ms: 2_000)
        XCTAssertFalse(channel.isActive, "the 2 s deadline")
    }
}
