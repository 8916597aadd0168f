import NIOCore
import NIOWebSocket
import RelayCore

/// A socket's WebSocket frames, both ways, for its whole life (one handler, one pipeline
/// context).
///
/// In: each read is checked for invalid UTF-8 in text messages as its bytes arrive
/// (`WebSocketTextValidator`: a message is refused at its first bad byte, even mid-frame; the
/// decoder hands over whole frames only), then cut into frames by NIO's `WebSocketFrameDecoder`
/// (its size limit, its control-frame rules). Out: frames are framed as NIO's
/// `WebSocketFrameEncoder` frames them (the same bytes), a small frame as one buffer.
///
/// One handler instead of four objects a socket kept for its whole life: NIO runs its decoder
/// inside a `ByteToMessageHandler` (two circular buffers and its own state, about 420 bytes per
/// socket), its encoder is a handler of its own that keeps a header buffer (about 200 bytes with
/// its context), and the UTF-8 check was a handler in front of the decoder (about 200). Between
/// reads this one keeps only the bytes of a frame not complete yet.
///
/// What `ByteToMessageHandler` does that matters here, it does too: bytes of an unfinished frame
/// wait for the next read; a read that arrives while frames are being handed on (re-entrantly)
/// is decoded after them, in order; after a decoding error every later read is reported as
/// `ByteToMessageDecoderError.dataReceivedInErrorState`. After invalid text it drops everything.
///
/// Fan-out writes its whole frames (`PreparedFrames`) from this handler's context, past its
/// encoding (`ReadyFramePath`).
final class WebSocketFrameCodec: ChannelDuplexHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = WebSocketFrame
    typealias OutboundIn = WebSocketFrame
    typealias OutboundOut = ByteBuffer

    /// Invalid UTF-8 in a text message: raised into the pipeline for the WebSocket handler to
    /// close with 1007.
    struct InvalidText: Error {}

    private enum State {
        case reading
        /// Invalid text: nothing more is read.
        case refused
        /// The relay sent its close frame: what the peer still sends is dropped unread, up to
        /// `allowance` bytes (its own close frame, what was in flight); past it the relay stops
        /// reading until the close deadline. A peer that floods after the close cannot keep the
        /// loop reading, and is not reset either: a reset would make its kernel drop the close
        /// frame (and its code) still waiting in its receive buffer. `following`: the frames are
        /// still followed for the peer's close frame — not after a broken frame, whose stream
        /// cannot be followed (the peer's FIN or the deadline ends it then).
        case discarding(allowance: Int, following: Bool)
        /// Past the allowance after the close: nothing more is read.
        case held
        /// The decoder threw. (Boxed: an error existential would take 40 bytes in every
        /// socket's reader.)
        indirect case failed(any Error)
    }

    private let decoder: WebSocketFrameDecoder
    /// Follows the frames the decoder takes, byte for byte, and refuses one whose header declares
    /// more than the session's limit in force (`frameLimit`) as soon as the decoder has read the
    /// header, before it buffers the payload: before CONNECT and after a `41`, the small
    /// pre-authentication size. Fed in step with the decoder, so a limit lowered by a frame (a
    /// `41`) holds for the very next one, even in the same read.
    private var limitScanner: WebSocketFrameScanner
    /// The connection's admission, given back when the codec leaves the pipeline (the connection
    /// closed); `nil` in tests.
    private var admission: ConnectionAdmission?
    private var validator = WebSocketTextValidator()
    /// Bytes read and not yet a whole frame; `nil` when none (nearly always, between reads).
    private var pending: ByteBuffer?
    /// Frames are being handed on: a read meanwhile waits in `pending` for the loop.
    private var decoding = false
    private var state = State.reading
    /// `PeerClosed` was raised.
    private var toldPeerClosed = false

    /// Bytes already consumed at the front of `pending` beyond which they are dropped before
    /// more are appended.
    private static let reclaimThreshold = 1024

    /// `maxFrameSize`: the largest frame payload the decoder takes (`NIOWebSocketError.invalidFrameLength` beyond).
    init(maxFrameSize: Int, admission: ConnectionAdmission? = nil) {
        decoder = WebSocketFrameDecoder(maxFrameSize: maxFrameSize)
        limitScanner = WebSocketFrameScanner(limit: maxFrameSize)
        self.admission = admission
    }

    /// The largest frame payload taken now (the session's `LimitsInForce`); the decoder's own
    /// `maxFrameSize` bounds it from above.
    var frameLimit: Int {
        get { Int(clamping: limitScanner.limit) }
        set { limitScanner.limit = UInt64(clamping: max(0, newValue)) }
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        var bytes = unwrapInboundIn(data)
        switch state {
        case .reading:
            break
        case .refused, .held:
            return
        case .discarding(let allowance, let following):
            let left = allowance - bytes.readableBytes
            guard left >= 0 else {
                state = .held
                try? context.channel.syncOptions?.setOption(ChannelOptions.autoRead, value: false)
                return
            }
            state = .discarding(allowance: left, following: following)
            // Followed, not decoded: only the peer's close frame matters now.
            if following { followAfterClose(bytes, context: context) }
            return
        case .failed(let error):
            context.fireErrorCaught(ByteToMessageDecoderError.dataReceivedInErrorState(error, bytes))
            return
        }
        // Every byte is checked once, as it arrives, before any frame is cut from it.
        guard bytes.withUnsafeReadableBytes({ validator.scan($0) }) == .ok else {
            state = .refused
            // Nothing more is decoded, but the frames are still followed (the scanner stays in
            // step with the stream), so the peer's answer to the relay's close is seen.
            limitScanner.limit = .max
            if let rest = pending { _ = limitScanner.scan(rest.readableBytesView) }
            _ = limitScanner.scan(bytes.readableBytesView)
            pending = nil
            context.fireErrorCaught(InvalidText())
            return
        }
        append(&bytes)
        guard !decoding, let input = pending else { return }
        pending = nil
        decodeFrames(input, context: context)
    }

    /// The relay closed the WebSocket (its close frame is written): from now on input is dropped
    /// without decoding, and past `allowance` bytes of it nothing more is read (the transport's
    /// close deadline ends the connection).
    /// The frames are still followed (not decoded), so the peer's close frame is seen: the
    /// transport closes the connection then (`PeerClosed`, or `peerHasClosed` when it came first).
    func discardInput(allowance: Int) {
        switch state {
        case .reading, .refused: break
        case .failed:
            // A broken frame: the rest is dropped unfollowed, and never raised as an error (which
            // would close the connection with input unread: a reset).
            pending = nil
            state = .discarding(allowance: allowance, following: false)
            return
        case .discarding, .held: return
        }
        // The scanner follows every byte from here on, whatever a frame declares.
        limitScanner.limit = .max
        state = .discarding(allowance: allowance, following: true)
        // While frames are handed on, `decodeFrames` follows the rest of its read and then what
        // waits here, in stream order.
        guard !decoding, let rest = pending else { return }
        _ = limitScanner.scan(rest.readableBytesView)
        pending = nil
    }

    /// Bytes read after the relay's close frame: only followed, for the peer's close frame.
    private func followAfterClose(_ bytes: ByteBuffer, context: ChannelHandlerContext) {
        _ = limitScanner.scan(bytes.readableBytesView)
        if let rest = pending { _ = limitScanner.scan(rest.readableBytesView) }
        pending = nil
        tellIfPeerClosed(context: context)
    }

    /// Once, after the relay's close: the peer's close frame came (`PeerClosed`).
    private func tellIfPeerClosed(context: ChannelHandlerContext) {
        guard limitScanner.sawClose, !toldPeerClosed else { return }
        toldPeerClosed = true
        context.fireUserInboundEventTriggered(PeerClosed())
    }

    /// The peer's close frame has come (decoded before the relay closed, or followed after).
    var peerHasClosed: Bool { limitScanner.sawClose }

    /// Raised into the pipeline once the peer's close frame comes after the relay's: the
    /// closing handshake is complete.
    struct PeerClosed {}

    /// Past the allowance after the close: the peer's bytes wait in its kernel's buffers.
    var holdsInput: Bool {
        if case .held = state { return true }
        return false
    }

    /// Adds `bytes` after the ones waiting.
    private func append(_ bytes: inout ByteBuffer) {
        guard var held = pending else {
            pending = bytes
            return
        }
        pending = nil  // one reference: appending does not copy it
        if held.readerIndex >= Self.reclaimThreshold { held.discardReadBytes() }
        held.writeBuffer(&bytes)
        pending = held
    }

    /// Hands on every whole frame of `input` (and of reads that arrive meanwhile); keeps the rest.
    private func decodeFrames(_ input: ByteBuffer, context: ChannelHandlerContext) {
        var buffer = input
        decoding = true
        defer { decoding = false }
        while true {
            do {
                while buffer.readableBytes > 0 {
                    let before = buffer
                    let state = try decoder.decode(context: context, buffer: &buffer)
                    // What the decoder just took, header bytes included, against the limit in
                    // force now (a frame it handed on may have changed it).
                    let taken = buffer.readerIndex - before.readerIndex
                    if taken > 0, case .tooLarge = limitScanner.scan(before.readableBytesView.prefix(taken)) {
                        throw NIOWebSocketError.invalidFrameLength
                    }
                    guard state == .continue, case .reading = self.state else { break }
                }
            } catch {
                state = .failed(error)
                pending = nil
                context.fireErrorCaught(error)
                return
            }
            guard case .reading = state else {
                // The relay closed while frames were handed on: the rest of this read is
                // followed, not decoded, so the scanner stays in step for the peer's close frame.
                if case .discarding = state { followAfterClose(buffer, context: context) }
                return
            }
            // Reads that came in while frames were handed on follow what is left of this one.
            guard var more = pending else { break }
            pending = nil
            if buffer.readableBytes > 0 {
                buffer.writeBuffer(&more)
            } else {
                buffer = more
            }
        }
        if buffer.readableBytes > 0 { pending = buffer }
    }

    // MARK: Out

    /// A frame whose payload is at most this long is written as one buffer, header and payload
    /// (a copy of the payload); a larger one as two, its header in a buffer of its own.
    static let copyLimit = 1024

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        let frame = unwrapOutboundIn(data)
        var payload = frame.data
        var extensionData = frame.extensionData
        if let key = frame.maskKey {
            extensionData?.webSocketMask(key)
            payload.webSocketMask(key, indexOffset: (extensionData?.readableBytes ?? 0) % 4)
        }
        let header = FrameHeader(frame)
        if let leading = extensionData {
            context.write(wrapOutboundOut(header.buffer(allocator: context.channel.allocator)), promise: nil)
            context.write(wrapOutboundOut(leading), promise: nil)
        } else if payload.readableBytes <= Self.copyLimit {
            var whole = context.channel.allocator.buffer(capacity: header.byteCount + payload.readableBytes)
            header.write(into: &whole)
            whole.writeBuffer(&payload)
            return context.write(wrapOutboundOut(whole), promise: promise)
        } else {
            context.write(wrapOutboundOut(header.buffer(allocator: context.channel.allocator)), promise: nil)
        }
        context.write(wrapOutboundOut(payload), promise: promise)
    }

    // MARK: Lifecycle

    func channelInactive(context: ChannelHandlerContext) {
        pending = nil
        context.fireChannelInactive()
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        pending = nil
        admission?.release()
        admission = nil
    }
}

/// A frame's header as RFC 6455 §5.2 lays it out, and as NIO's encoder writes it: the first byte
/// (FIN, RSV1–3, opcode), the shortest length form, the mask key if any.
private struct FrameHeader {
    let firstByte: UInt8
    let length: Int
    let maskKey: WebSocketMaskingKey?

    init(_ frame: WebSocketFrame) {
        var first = UInt8(webSocketOpcode: frame.opcode)
        if frame.fin { first |= 0x80 }
        if frame.rsv1 { first |= 0x40 }
        if frame.rsv2 { first |= 0x20 }
        if frame.rsv3 { first |= 0x10 }
        firstByte = first
        length = frame.length
        maskKey = frame.maskKey
    }

    var byteCount: Int {
        let lengthBytes = length <= 125 ? 0 : length <= Int(UInt16.max) ? 2 : 8
        return 2 + lengthBytes + (maskKey == nil ? 0 : 4)
    }

    func write(into buffer: inout ByteBuffer) {
        let maskBit: UInt8 = maskKey == nil ? 0 : 0x80
        buffer.writeInteger(firstByte)
        if length <= 125 {
            buffer.writeInteger(UInt8(truncatingIfNeeded: length) | maskBit)
        } else if length <= Int(UInt16.max) {
            buffer.writeInteger(126 | maskBit)
            buffer.writeInteger(UInt16(truncatingIfNeeded: length))
        } else {
            buffer.writeInteger(127 | maskBit)
            buffer.writeInteger(UInt64(truncatingIfNeeded: length))
        }
        if let maskKey { buffer.writeBytes(maskKey) }
    }

    func buffer(allocator: ByteBufferAllocator) -> ByteBuffer {
        var buffer = allocator.buffer(capacity: byteCount)
        write(into: &buffer)
        return buffer
    }
}
