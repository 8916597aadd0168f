import NIOCore
import NIOWebSocket
import RelayCore

/// Sits in front of NIO's WebSocket frame decoder until the socket authenticates and refuses
/// any frame that declares more than a small payload, as soon as its header arrives. Without
/// it an unauthenticated client could make the decoder buffer `maxPayload` bytes per socket
/// (500 sockets × 1 MB = 500 MB) until the CONNECT timeout.
///
/// It never holds bytes: every buffer is passed on as it came. The session removes it once
/// CONNECT succeeded; from then on the decoder's own `maxFrameSize` applies.
final class FrameSizeGuard: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer

    private var scanner: WebSocketFrameScanner
    private var refused = false

    init(limit: Int) {
        scanner = WebSocketFrameScanner(limit: limit)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard !refused else { return }
        let buffer = unwrapInboundIn(data)
        switch scanner.scan(buffer.readableBytesView) {
        case .ok:
            context.fireChannelRead(data)
        case .tooLarge:
            // The session closes with 1009, as for any frame over the decoder's limit.
            refused = true
            context.fireErrorCaught(NIOWebSocketError.invalidFrameLength)
        }
    }
}
