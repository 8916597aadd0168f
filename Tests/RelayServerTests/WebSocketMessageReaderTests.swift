import NIOCore
import NIOWebSocket
import RelayCore
import XCTest

@testable import RelayServer

/// The reader's one-frame fast path: a whole uncompressed message unmasked straight into an
/// array must be byte for byte what NIO's own unmasking gives, and keep every check of the
/// general path (size, UTF-8).
final class WebSocketMessageReaderTests: XCTestCase {
    private func frame(_ payload: [UInt8], opcode: WebSocketOpcode = .text, key: WebSocketMaskingKey, fin: Bool = true) -> WebSocketFrame {
        var data = ByteBuffer(bytes: payload)
        data.webSocketMask(key)
        return WebSocketFrame(fin: fin, opcode: opcode, maskKey: key, data: data)
    }

    func testUnmaskingMatchesNIOForEveryLengthAndKey() {
        var rng = SystemRandomNumberGenerator()
        for length in 0...37 {
            for _ in 0..<8 {
                let key = WebSocketMaskingKey.random(using: &rng)
                let payload = (0..<length).map { _ in UInt8.random(in: 0...255, using: &rng) }
                let f = frame(payload, opcode: .binary, key: key)
                XCTAssertEqual(WebSocketMessageReader.unmasked(f.data, key: key), Array(f.unmaskedData.readableBytesView))
                XCTAssertEqual(WebSocketMessageReader.unmasked(f.data, key: key), payload)
            }
        }
    }

    func testAOneFrameMessageComesAsBytesWithTheSameChecks() {
        let key = WebSocketMaskingKey([1, 2, 3, 4])!
        let allocator = ByteBufferAllocator()
        var reader = WebSocketMessageReader(maxMessageBytes: 16, inflater: nil, messagesAsBytes: true)
        guard case .bytes(.text, let bytes) = reader.read(frame(Array("42[\"a\",{}]".utf8), key: key), allocator: allocator) else {
            return XCTFail("expected bytes")
        }
        XCTAssertEqual(String(decoding: bytes, as: UTF8.self), "42[\"a\",{}]")
        guard case .bytes(.text, let accented) = reader.read(frame(Array("é€".utf8), key: key), allocator: allocator) else {
            return XCTFail("valid UTF-8 beyond ASCII passes")
        }
        XCTAssertEqual(String(decoding: accented, as: UTF8.self), "é€")
        guard case .fail(CloseCode.invalidPayloadData, _) = reader.read(frame([0x34, 0xC3], key: key), allocator: allocator) else {
            return XCTFail("invalid UTF-8 fails")
        }
        guard case .fail(CloseCode.messageTooBig, _) = reader.read(frame(Array(repeating: 0x61, count: 17), key: key), allocator: allocator) else {
            return XCTFail("over the cap fails")
        }
        // A fragmented message comes as bytes too, reassembled (`FragmentAssembly`).
        var fragmented = WebSocketMessageReader(maxMessageBytes: 16, inflater: nil, messagesAsBytes: true)
        guard case .none = fragmented.read(frame(Array("ab".utf8), key: key, fin: false), allocator: allocator) else { return XCTFail("first fragment") }
        let last = WebSocketFrame(fin: true, opcode: .continuation, maskKey: key, data: {
            var d = ByteBuffer(string: "cd"); d.webSocketMask(key); return d
        }())
        guard case .bytes(.text, let whole) = fragmented.read(last, allocator: allocator) else { return XCTFail("whole message") }
        XCTAssertEqual(String(decoding: whole, as: UTF8.self), "abcd")
    }
}
