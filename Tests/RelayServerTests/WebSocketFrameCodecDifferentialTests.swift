import NIOCore
import NIOEmbedded
import NIOWebSocket
import RelayTestSupport
import XCTest

@testable import RelayServer

/// `WebSocketFrameCodec` against NIO's own `WebSocketFrameDecoder` (in its
/// `ByteToMessageHandler`, the pipeline the codec replaced) on seeded random streams, each fed
/// in random splits: valid streams give the same frames; a text message going invalid is
/// refused (1007's error) with nothing from it or after it; mutated and truncated streams never
/// trap, and what the codec hands on is always a prefix of what NIO's decoder cuts. (The fuzz
/// build compiles RelayCore only; the codec needs NIO, so its hostile inputs are generated here.)
final class WebSocketFrameCodecDifferentialTests: XCTestCase {
    private static let maxFrameSize = 600

    /// A frame as both sides hand it on, unmasked.
    private struct Seen: Equatable, CustomStringConvertible {
        var fin: Bool
        var opcode: UInt8
        var rsv: UInt8
        var payload: [UInt8]

        init(_ frame: WebSocketFrame) {
            fin = frame.fin
            opcode = UInt8(webSocketOpcode: frame.opcode)
            rsv = (frame.rsv1 ? 4 : 0) | (frame.rsv2 ? 2 : 0) | (frame.rsv3 ? 1 : 0)
            payload = Array(frame.unmaskedData.readableBytesView)
        }

        var description: String { "\(opcode)\(fin ? "" : "…") \(payload.count) B" }
    }

    private final class Recorder: ChannelInboundHandler {
        typealias InboundIn = WebSocketFrame
        var frames: [Seen] = []
        var errors: [any Error] = []
        /// The first error (later reads are each reported as data received in the error state,
        /// as NIO's `ByteToMessageHandler` reports them).
        var firstError: (any Error)? { errors.first }
        /// Frames handed on after the first error (must stay 0).
        var framesAfterError = 0

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            if !errors.isEmpty { framesAfterError += 1 }
            frames.append(Seen(unwrapInboundIn(data)))
        }

        func errorCaught(context: ChannelHandlerContext, error: any Error) {
            errors.append(error)
        }
    }

    // MARK: Streams

    private struct Frame {
        var fin = true
        var rsv: UInt8 = 0
        var opcode: UInt8
        var payload: [UInt8]
        var mask: [UInt8]?
    }

    private func encode(_ f: Frame) -> [UInt8] {
        var out: [UInt8] = [(f.fin ? 0x80 : 0) | (f.rsv << 4) | f.opcode]
        let maskBit: UInt8 = f.mask == nil ? 0 : 0x80
        switch f.payload.count {
        case ..<126: out.append(maskBit | UInt8(f.payload.count))
        case ..<65_536: out += [maskBit | 126, UInt8(f.payload.count >> 8), UInt8(f.payload.count & 0xFF)]
        default:
            out.append(maskBit | 127)
            for i in (0..<8).reversed() { out.append(UInt8((f.payload.count >> (i * 8)) & 0xFF)) }
        }
        guard let key = f.mask else { return out + f.payload }
        out += key
        for (i, byte) in f.payload.enumerated() { out.append(byte ^ key[i % 4]) }
        return out
    }

    private func text(_ rng: inout SplitMix64, count: Int) -> [UInt8] {
        let pieces: [[UInt8]] = [Array("a".utf8), Array("Z9 ".utf8), Array("é".utf8), Array("€".utf8), Array("😀".utf8), Array("\u{7F}".utf8)]
        var out: [UInt8] = []
        while out.count < count { out += pieces.randomElement(using: &rng) ?? [] }
        return out
    }

    /// A valid stream: messages of 1–3 fragments (text split anywhere, even mid-character, or
    /// binary) with control frames between them, every frame masked and within the size limit.
    private func validStream(_ rng: inout SplitMix64) -> (frames: [Frame], textMessages: [[Int]]) {
        var frames: [Frame] = []
        var textMessages: [[Int]] = []
        for _ in 0..<Int.random(in: 1...5, using: &rng) {
            let mask = (0..<4).map { _ in UInt8.random(in: 0...255, using: &rng) }
            if Int.random(in: 0..<4, using: &rng) == 0 {
                let opcode: UInt8 = [0x9, 0xA].randomElement(using: &rng) ?? 0x9
                frames.append(Frame(opcode: opcode, payload: (0..<Int.random(in: 0...125, using: &rng)).map { _ in UInt8.random(in: 0...255, using: &rng) }, mask: mask))
                continue
            }
            let isText = Bool.random(using: &rng)
            // Text may come out up to 3 bytes longer (whole characters): still within the limit.
            let length = [0, 1, 5, 125, 126, 300, Self.maxFrameSize - 3].randomElement(using: &rng) ?? 1
            let message = isText ? text(&rng, count: length) : (0..<length).map { _ in UInt8.random(in: 0...255, using: &rng) }
            // Cut into 1–3 fragments (the message is within maxFrameSize, so each is).
            var cuts = [0, message.count]
            for _ in 0..<Int.random(in: 0...2, using: &rng) { cuts.append(Int.random(in: 0...message.count, using: &rng)) }
            cuts.sort()
            var indexes: [Int] = []
            for (n, (from, to)) in zip(cuts, cuts.dropFirst()).enumerated() {
                let last = n == cuts.count - 2
                indexes.append(frames.count)
                frames.append(Frame(fin: last, opcode: n == 0 ? (isText ? 0x1 : 0x2) : 0x0, payload: Array(message[from..<to]), mask: mask))
            }
            if isText { textMessages.append(indexes) }
        }
        return (frames, textMessages)
    }

    // MARK: Runs

    private func run(_ stream: [UInt8], chunks: [Int]) throws -> Recorder {
        let recorder = Recorder()
        let channel = EmbeddedChannel(handlers: [WebSocketFrameCodec(maxFrameSize: Self.maxFrameSize), recorder])
        var index = 0
        var c = 0
        while index < stream.count {
            let size = max(1, chunks[c % chunks.count])
            c += 1
            try channel.writeInbound(ByteBuffer(bytes: stream[index..<min(index + size, stream.count)]))
            index += size
        }
        _ = try? channel.finish()
        return recorder
    }

    /// NIO's decoder in its `ByteToMessageHandler`, the whole stream in one read.
    private func reference(_ stream: [UInt8]) throws -> Recorder {
        let recorder = Recorder()
        let channel = EmbeddedChannel(handlers: [ByteToMessageHandler(WebSocketFrameDecoder(maxFrameSize: Self.maxFrameSize)), recorder])
        try channel.writeInbound(ByteBuffer(bytes: stream))
        _ = try? channel.finish()
        return recorder
    }

    private func randomChunks(_ rng: inout SplitMix64, _ count: Int) -> [Int] {
        switch Int.random(in: 0..<4, using: &rng) {
        case 0: return [1]
        case 1: return [count]
        default: return (0..<8).map { _ in Int.random(in: 1...max(1, count / 3), using: &rng) }
        }
    }

    func testValidStreamsGiveNIOsFramesHoweverTheyAreSplit() throws {
        var rng = SplitMix64(seed: 0x5EED_C0DE)
        for round in 0..<300 {
            let stream = validStream(&rng).frames.flatMap(encode)
            let expected = try reference(stream)
            XCTAssertNil(expected.firstError, "round \(round): the generator made an invalid stream")
            let chunks = randomChunks(&rng, stream.count)
            let got = try run(stream, chunks: chunks)
            XCTAssertEqual(got.frames, expected.frames, "round \(round), chunks \(chunks)")
            XCTAssertNil(got.firstError, "round \(round)")
        }
    }

    func testATextMessageGoingInvalidIsRefusedWithNothingFromItOrAfterIt() throws {
        var rng = SplitMix64(seed: 0xBAD_7E47)
        var refused = 0
        for round in 0..<300 {
            var (frames, textMessages) = validStream(&rng)
            let candidates = textMessages.filter { $0.contains { !frames[$0].payload.isEmpty } }
            guard let message = candidates.randomElement(using: &rng) else { continue }
            // One byte of the message made one that is never valid in UTF-8.
            let target = message.filter { !frames[$0].payload.isEmpty }.randomElement(using: &rng) ?? message[0]
            let at = Int.random(in: 0..<frames[target].payload.count, using: &rng)
            let badByte: UInt8 = [0xC0, 0xC1, 0xF5, 0xF8, 0xFF].randomElement(using: &rng) ?? 0xFF
            frames[target].payload[at] = badByte
            let stream = frames.flatMap(encode)
            let expected = try reference(stream)
            // The reference does not check UTF-8: every frame is there; ours stops before the
            // first frame of the message whose bytes went bad (at the latest the target).
            XCTAssertNil(expected.firstError, "round \(round)")
            let chunks = randomChunks(&rng, stream.count)
            let got = try run(stream, chunks: chunks)
            XCTAssertEqual(got.errors.count, 1, "round \(round)")
            XCTAssertTrue(got.firstError is WebSocketFrameCodec.InvalidText, "round \(round): \(String(describing: got.firstError))")
            XCTAssertEqual(got.framesAfterError, 0)
            XCTAssertLessThanOrEqual(got.frames.count, target, "round \(round): a frame from the bad one on was handed on")
            XCTAssertEqual(got.frames, Array(expected.frames.prefix(got.frames.count)), "round \(round)")
            if chunks == [1] {
                // Byte by byte, every frame before the message's first bad byte is whole first.
                XCTAssertGreaterThanOrEqual(got.frames.count, message[0], "round \(round): \(got.frames) of \(expected.frames), bad byte in frame \(target)")
            }
            refused += 1
        }
        XCTAssertGreaterThan(refused, 150, "the generator made too few text messages")
    }

    func testMutatedStreamsNeverTrapAndOnlyEverHandOnAPrefixOfNIOsFrames() throws {
        var rng = SplitMix64(seed: 0xF022_0001)
        for round in 0..<600 {
            var stream = validStream(&rng).frames.flatMap(encode)
            switch Int.random(in: 0..<5, using: &rng) {
            case 0:  // random bytes overwritten
                for _ in 0..<Int.random(in: 1...6, using: &rng) where !stream.isEmpty {
                    stream[Int.random(in: 0..<stream.count, using: &rng)] = UInt8.random(in: 0...255, using: &rng)
                }
            case 1:  // cut short
                stream = Array(stream.prefix(Int.random(in: 0...stream.count, using: &rng)))
            case 2:  // a header claiming a huge or 64-bit length, unmasked or reserved bits set
                let header: [[UInt8]] = [[0x81, 0xFF, 0x7F, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF], [0x82, 0xFE, 0xFF, 0xFF], [0xF1, 0x80], [0x83, 0x80], [0x89, 0xFE, 0x01, 0x00]]
                stream.insert(contentsOf: header.randomElement(using: &rng) ?? [], at: Int.random(in: 0...stream.count, using: &rng))
            case 3:  // pure noise
                stream = (0..<Int.random(in: 0...400, using: &rng)).map { _ in UInt8.random(in: 0...255, using: &rng) }
            default:  // a second stream glued on after noise
                stream += (0..<Int.random(in: 1...20, using: &rng)).map { _ in UInt8.random(in: 0...255, using: &rng) }
            }
            let expected = try reference(stream)
            let chunks = randomChunks(&rng, max(1, stream.count))
            let got = try run(stream, chunks: chunks)
            XCTAssertEqual(got.framesAfterError, 0, "round \(round)")
            XCTAssertEqual(got.frames, Array(expected.frames.prefix(got.frames.count)), "round \(round), chunks \(chunks)")
            if expected.firstError != nil {
                XCTAssertNotNil(got.firstError, "round \(round): NIO's decoder failed, the codec did not")
            } else if got.firstError == nil {
                XCTAssertEqual(got.frames, expected.frames, "round \(round): no error, yet frames missing")
            }
        }
    }
}
