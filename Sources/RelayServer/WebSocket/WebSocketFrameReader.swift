import NIOCore
import NIOWebSocket
import RelayCore

/// A socket's WebSocket frames from its bytes, for its whole life: each read is checked for
/// invalid UTF-8 in text messages as its bytes arrive (`WebSocketTextValidator`: a message is
/// refused at its first bad byte, even mid-frame; the decoder hands over whole frames only), then
/// cut into frames by NIO's `WebSocketFrameDecoder` (its size limit, its control-frame rules).
///
/// One handler instead of three objects a socket kept for its whole life: NIO runs its decoder
/// inside a `ByteToMessageHandler` (two circular buffers and its own state, about 420 bytes per
/// socket), and the UTF-8 check was a handler of its own in front of it (with its pipeline
/// context, about 200 bytes). Between reads this one keeps only the bytes of a frame not
/// complete yet.
///
/// What `ByteToMessageHandler` does that matters here, it does too: bytes of an unfinished frame
/// wait for the next read; a read that arrives while frames are being handed on (re-entrantly)
/// is decoded after them, in order; after a decoding error every later read is reported as
/// `ByteToMessageDecoderError.dataReceivedInErrorState`. After invalid text it drops everything.
final class WebSocketFrameReader: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = WebSocketFrame

    private enum State {
        case reading
        /// Invalid text: nothing more is read.
        case refused
        /// The decoder threw. (Boxed: an error existential would take 40 bytes in every
        /// socket's reader.)
        indirect case failed(any Error)
    }

    private let decoder: WebSocketFrameDecoder
    private var validator = WebSocketTextValidator()
    /// Bytes read and not yet a whole frame; `nil` when none (nearly always, between reads).
    private var pending: ByteBuffer?
    /// Frames are being handed on: a read meanwhile waits in `pending` for the loop.
    private var decoding = false
    private var state = State.reading

    /// Bytes already consumed at the front of `pending` beyond which they are dropped before
    /// more are appended.
    private static let reclaimThreshold = 1024

    /// `maxFrameSize`: the largest frame payload the decoder takes (`NIOWebSocketError.invalidFrameLength` beyond).
    init(maxFrameSize: Int) {
        decoder = WebSocketFrameDecoder(maxFrameSize: maxFrameSize)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        var bytes = unwrapInboundIn(data)
        switch state {
        case .reading:
            break
        case .refused:
            return
        case .failed(let error):
            context.fireErrorCaught(ByteToMessageDecoderError.dataReceivedInErrorState(error, bytes))
            return
        }
        // Every byte is checked once, as it arrives, before any frame is cut from it.
        guard bytes.withUnsafeReadableBytes({ validator.scan($0) }) == .ok else {
            state = .refused
            pending = nil
            // The error `TextUTF8Guard` raised when it was a handler of its own (close 1007).
            context.fireErrorCaught(TextUTF8Guard.InvalidText())
            return
        }
        append(&bytes)
        guard !decoding, let input = pending else { return }
        pending = nil
        decodeFrames(input, context: context)
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
                while buffer.readableBytes > 0, try decoder.decode(context: context, buffer: &buffer) == .continue {}
            } catch {
                state = .failed(error)
                pending = nil
                context.fireErrorCaught(error)
                return
            }
            guard case .reading = state else { return }
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

    func channelInactive(context: ChannelHandlerContext) {
        pending = nil
        context.fireChannelInactive()
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        pending = nil
    }
}
