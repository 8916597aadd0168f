import NIOCore

/// One Redis connection's pipeline end: writes commands, matches replies to them in order
/// (pipelining), and hands everything that is not a reply — RESP3 pushes, RESP2 pub/sub
/// messages on a subscriber connection — to `onPush`.
final class RedisConnectionHandler: ChannelDuplexHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundIn = RedisRequest
    typealias OutboundOut = ByteBuffer

    struct RedisRequest {
        var bytes: ByteBuffer
        /// `nil` for fire-and-forget commands on a subscriber connection.
        var promise: EventLoopPromise<RESPValue>?
    }

    private var pending = CircularBuffer<EventLoopPromise<RESPValue>>()
    private var buffer: ByteBuffer?
    private var parser = RESPParser()
    private let onPush: (RESPValue) -> Void

    init(onPush: @escaping (RESPValue) -> Void) {
        self.onPush = onPush
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        let request = unwrapOutboundIn(data)
        if let p = request.promise { pending.append(p) }
        context.write(wrapOutboundOut(request.bytes), promise: promise)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        var incoming = unwrapInboundIn(data)
        if var held = buffer {
            buffer = nil  // one reference while it grows: no copy
            held.writeBuffer(&incoming)
            buffer = held
        } else {
            buffer = incoming
        }
        do {
            while var b = buffer, let value = try parser.parse(&b) {
                buffer = b
                if case .push = value {
                    onPush(value)
                } else if let promise = pending.popFirst() {
                    if case .error(let message) = value { promise.fail(RESPError.server(message)) } else { promise.succeed(value) }
                } else {
                    onPush(value)
                }
            }
            if buffer?.readableBytes == 0 { buffer = nil } else { buffer?.discardReadBytes() }
        } catch {
            failAll(error)
            context.close(promise: nil)
        }
    }

    func channelInactive(context: ChannelHandlerContext) {
        failAll(RESPError.connectionClosed)
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: Error) {
        failAll(error)
        context.close(promise: nil)
    }

    private func failAll(_ error: Error) {
        while let p = pending.popFirst() { p.fail(error) }
    }
}
