import NIOCore
import NIOWebSocket
import RelayCore

/// Echoes every message back (`--echo-path`, off by default), through the same
/// `WebSocketMessageReader`, permessage-deflate and close handling as the Engine.IO sessions.
/// It exists so an Autobahn-style conformance suite can test Relay's WebSocket stack.
final class WebSocketEchoHandler: ChannelInboundHandler {
    typealias InboundIn = WebSocketFrame
    typealias OutboundOut = WebSocketFrame

    private var reader: WebSocketMessageReader
    private let deflate: PerMessageDeflateNegotiation?
    private let partition: LoopPartition
    private let thresholdBytes: Int
    private var closing = false

    init(maxMessageBytes: Int, deflate: PerMessageDeflateNegotiation?, partition: LoopPartition, thresholdBytes: Int) {
        self.reader = WebSocketMessageReader(maxMessageBytes: maxMessageBytes, inflater: deflate != nil ? partition.inflater : nil)
        self.deflate = deflate
        self.partition = partition
        self.thresholdBytes = thresholdBytes
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard !closing else { return }
        switch reader.read(unwrapInboundIn(data), allocator: context.channel.allocator) {
        case .none, .pong:
            break
        case .bytes(let opcode, let bytes):
            context.writeAndFlush(wrapOutboundOut(WebSocketFrame(fin: true, opcode: opcode, data: ByteBuffer(bytes: bytes))), promise: nil)
        case .message(let opcode, let buffer):
            if let deflate, buffer.readableBytes >= thresholdBytes {
                let compressed = partition.deflater(windowBits: deflate.serverMaxWindowBits).compress(buffer, allocator: context.channel.allocator)
                context.writeAndFlush(wrapOutboundOut(WebSocketFrame(fin: true, rsv1: true, opcode: opcode, data: compressed)), promise: nil)
            } else {
                context.writeAndFlush(wrapOutboundOut(WebSocketFrame(fin: true, opcode: opcode, data: buffer)), promise: nil)
            }
        case .ping(let data):
            context.writeAndFlush(wrapOutboundOut(WebSocketFrame(fin: true, opcode: .pong, data: data)), promise: nil)
        case .peerClosed(let code):
            close(context: context, code: code)
        case .fail(let code, _):
            close(context: context, code: code)
        }
    }

    func errorCaught(context: ChannelHandlerContext, error: Error) {
        if let wsError = error as? NIOWebSocketError {
            close(context: context, code: wsError == .invalidFrameLength ? CloseCode.messageTooBig : CloseCode.protocolError)
        } else if error is WebSocketFrameCodec.InvalidText {
            close(context: context, code: CloseCode.invalidPayloadData)
        } else {
            context.close(promise: nil)
        }
    }

    private func close(context: ChannelHandlerContext, code: UInt16) {
        guard !closing else { return }
        closing = true
        var data = context.channel.allocator.buffer(capacity: 2)
        data.writeInteger(code)
        let channel = context.channel
        context.writeAndFlush(wrapOutboundOut(WebSocketFrame(fin: true, opcode: .connectionClose, data: data))).whenComplete { _ in
            channel.close(promise: nil)
        }
    }
}
