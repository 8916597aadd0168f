import NIOCore
import RelayCore

/// Sits in front of NIO's WebSocket frame decoder for the whole life of a socket and refuses a
/// text message at its first invalid UTF-8 byte, even mid-frame (`WebSocketTextValidator`): the
/// decoder hands over whole frames only, so without it a client could stream most of a
/// megabyte of invalid text before the 1007. It never holds bytes.
final class TextUTF8Guard: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer

    /// Raised into the pipeline for the WebSocket handler to close with 1007.
    struct InvalidText: Error {}

    private var validator = WebSocketTextValidator()
    private var refused = false

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard !refused else { return }
        let buffer = unwrapInboundIn(data)
        let verdict = buffer.withUnsafeReadableBytes { validator.scan($0) }
        guard verdict == .ok else {
            refused = true
            context.fireErrorCaught(InvalidText())
            return
        }
        context.fireChannelRead(data)
    }
}
