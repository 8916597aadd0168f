import RelayCore
import NIOCore
import NIOWebSocket

/// Turns a client's WebSocket frames into whole messages, enforcing RFC 6455 (masking, reserved
/// bits, fragmentation, close codes, UTF-8) and RFC 7692 (compressed messages), with a cap on
/// the message size before and after decompression. Shared by the Engine.IO sessions and the
/// echo endpoint, so the conformance suite tests the same code that carries events.
struct WebSocketMessageReader {
    enum Output {
        case none
        /// A complete message: text (valid UTF-8) or binary, decompressed.
        case message(WebSocketOpcode, ByteBuffer)
        /// A complete message of one uncompressed frame, unmasked straight into an array (with
        /// `messagesAsBytes`): what a session takes, in one allocation instead of an unmasked
        /// copy of the frame and then an array of it.
        case bytes(WebSocketOpcode, [UInt8])
        case ping(ByteBuffer)
        case pong
        /// The peer closed: answer with this code (its own, echoed) and close.
        case peerClosed(UInt16)
        /// The peer broke the protocol: close with this code.
        case fail(UInt16, String)
    }

    /// Largest message (after decompression); the session raises it once CONNECT succeeded.
    var maxMessageBytes: Int
    /// Set when permessage-deflate was negotiated.
    let inflater: MessageInflater?
    /// The message being reassembled from fragments (RelayCore's `FragmentAssembly`: linear in
    /// the message however it is split).
    private var fragments: FragmentAssembly?
    private var fragmentOpcode: WebSocketOpcode = .text
    private var fragmentCompressed = false
    /// Whether a message of one uncompressed frame comes as `.bytes`.
    let messagesAsBytes: Bool

    init(maxMessageBytes: Int, inflater: MessageInflater?, messagesAsBytes: Bool = false) {
        self.maxMessageBytes = maxMessageBytes
        self.inflater = inflater
        self.messagesAsBytes = messagesAsBytes
    }

    mutating func read(_ frame: WebSocketFrame, allocator: ByteBufferAllocator) -> Output {
        guard frame.maskKey != nil else { return .fail(CloseCode.protocolError, "client frames must be masked") }
        guard !frame.rsv2, !frame.rsv3 else { return .fail(CloseCode.protocolError, "reserved bits set") }
        if frame.rsv1 {
            // RSV1 marks a compressed message: only with permessage-deflate, only on its first frame.
            guard inflater != nil, frame.opcode == .text || frame.opcode == .binary else {
                return .fail(CloseCode.protocolError, "reserved bit set without an extension")
            }
        }
        switch frame.opcode {
        case .text, .binary:
            guard fragments == nil else { return .fail(CloseCode.protocolError, "new message before the previous one finished") }
            if frame.fin && !frame.rsv1 && messagesAsBytes, let key = frame.maskKey, frame.extensionData == nil {
                return finish(bytesOf: frame.data, key: key, opcode: frame.opcode)
            }
            if frame.fin { return finish(frame.unmaskedData, opcode: frame.opcode, compressed: frame.rsv1, allocator: allocator) }
            fragmentOpcode = frame.opcode
            fragmentCompressed = frame.rsv1
            guard frame.length <= maxMessageBytes else { return .fail(CloseCode.messageTooBig, "message exceeds maxPayload") }
            fragments = FragmentAssembly(first: Self.unmaskedBytes(of: frame))
            return .none
        case .continuation:
            guard var assembly = fragments else { return .fail(CloseCode.protocolError, "continuation without a message") }
            // Out of `fragments` while it grows: one reference, so appending never copies what
            // came before (a copy per frame once made a message of n frames cost n² bytes).
            fragments = nil
            guard assembly.append(Self.unmaskedBytes(of: frame), limit: maxMessageBytes) else {
                return .fail(CloseCode.messageTooBig, "message exceeds maxPayload")
            }
            guard frame.fin else {
                fragments = assembly
                return .none
            }
            if !fragmentCompressed && messagesAsBytes {
                let bytes = assembly.bytes
                if fragmentOpcode == .text, !bytes.withUnsafeBufferPointer(ASCII.isASCII), String(validating: bytes, as: UTF8.self) == nil {
                    return .fail(CloseCode.invalidPayloadData, "invalid UTF-8")
                }
                return .bytes(fragmentOpcode, bytes)
            }
            return finish(ByteBuffer(bytes: assembly.bytes), opcode: fragmentOpcode, compressed: fragmentCompressed, allocator: allocator)
        case .ping:
            return .ping(frame.unmaskedData)
        case .pong:
            return .pong
        case .connectionClose:
            var data = frame.unmaskedData
            if data.readableBytes == 0 { return .peerClosed(CloseCode.normal) }
            guard data.readableBytes >= 2, let code = data.readInteger(as: UInt16.self), CloseCode.isValidReceived(code) else {
                return .fail(CloseCode.protocolError, "invalid close code")
            }
            if data.readableBytes > 0, String(validating: data.readableBytesView, as: UTF8.self) == nil {
                return .fail(CloseCode.invalidPayloadData, "invalid UTF-8 in close reason")
            }
            return .peerClosed(code)
        default:
            return .fail(CloseCode.protocolError, "unknown opcode")
        }
    }

    private func finish(_ buffer: ByteBuffer, opcode: WebSocketOpcode, compressed: Bool, allocator: ByteBufferAllocator) -> Output {
        guard buffer.readableBytes <= maxMessageBytes else { return .fail(CloseCode.messageTooBig, "message exceeds maxPayload") }
        var message = buffer
        if compressed, let inflater {
            do throws(MessageInflater.InflateError) {
                message = try inflater.decompress(buffer, maxBytes: maxMessageBytes, allocator: allocator)
            } catch {
                switch error {
                case .tooLarge: return .fail(CloseCode.messageTooBig, "decompressed message exceeds maxPayload")
                case .corrupt: return .fail(CloseCode.invalidPayloadData, "invalid compressed data")
                }
            }
        }
        if opcode == .text, !Self.isValidUTF8(message.readableBytesView) {
            return .fail(CloseCode.invalidPayloadData, "invalid UTF-8")
        }
        return .message(opcode, message)
    }

    /// A whole uncompressed message of one frame, unmasked into an array and checked like `finish`.
    private func finish(bytesOf data: ByteBuffer, key: WebSocketMaskingKey, opcode: WebSocketOpcode) -> Output {
        let count = data.readableBytes
        guard count <= maxMessageBytes else { return .fail(CloseCode.messageTooBig, "message exceeds maxPayload") }
        let bytes = Self.unmasked(data, key: key)
        if opcode == .text, !bytes.withUnsafeBufferPointer(ASCII.isASCII), String(validating: bytes, as: UTF8.self) == nil {
            return .fail(CloseCode.invalidPayloadData, "invalid UTF-8")
        }
        return .bytes(opcode, bytes)
    }

    /// A frame's payload, unmasked, as an array.
    static func unmaskedBytes(of frame: WebSocketFrame) -> [UInt8] {
        guard let key = frame.maskKey, frame.extensionData == nil else { return Array(frame.unmaskedData.readableBytesView) }
        return unmasked(frame.data, key: key)
    }

    /// `data` XOR the masking key (RFC 6455 §5.3), into a new array.
    static func unmasked(_ data: ByteBuffer, key: WebSocketMaskingKey) -> [UInt8] {
        let mask = (key[key.startIndex], key[key.startIndex + 1], key[key.startIndex + 2], key[key.startIndex + 3])
        return data.withUnsafeReadableBytes { source in
            [UInt8](unsafeUninitializedCapacity: source.count) { target, initialized in
                var i = 0
                while i &+ 4 <= source.count {
                    target[i] = source[i] ^ mask.0
                    target[i &+ 1] = source[i &+ 1] ^ mask.1
                    target[i &+ 2] = source[i &+ 2] ^ mask.2
                    target[i &+ 3] = source[i &+ 3] ^ mask.3
                    i &+= 4
                }
                if i < source.count { target[i] = source[i] ^ mask.0; i &+= 1 }
                if i < source.count { target[i] = source[i] ^ mask.1; i &+= 1 }
                if i < source.count { target[i] = source[i] ^ mask.2; i &+= 1 }
                initialized = source.count
            }
        }
    }

    /// Whether `bytes` are valid UTF-8. ASCII (most events) is checked in place, without making
    /// a `String` (an allocation and a copy per message); anything else is validated by the
    /// standard library.
    static func isValidUTF8(_ bytes: ByteBufferView) -> Bool {
        if bytes.withContiguousStorageIfAvailable(ASCII.isASCII) == true { return true }
        return String(validating: bytes, as: UTF8.self) != nil
    }
}
