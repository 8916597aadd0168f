import Logging
import NIOCore
import RelayCore

/// The first handler of a connection when `proxy-protocol` is on: it reads the PROXY protocol
/// header (v1 or v2) that the load balancer writes before anything else, then lets `onHeader`
/// set up the rest of the pipeline (TLS, HTTP) for the client the header names, hands it the
/// bytes that followed the header, and removes itself.
///
/// The connection is closed when the peer is not a trusted proxy (checked before a byte is
/// read), when the bytes are not a valid header, or when no complete header arrived within
/// `timeout`. At most `ProxyProtocolHeader.maxHeaderBytes` are buffered.
final class ProxyProtocolHandler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer

    /// Sets up the pipeline after this handler for the client at the given address (the
    /// declared source, or the peer itself for LOCAL / UNKNOWN headers). Runs on the loop.
    typealias OnHeader = (any Channel, IPAddress) throws -> Void

    private let trusted: TrustedProxies
    private let timeout: TimeAmount
    private let logger: Logger
    private let onHeader: OnHeader
    private var buffer: ByteBuffer?
    private var timer: Scheduled<Void>?
    private enum State {
        case idle
        /// Reading the header from `peer`, a trusted proxy.
        case reading(peer: IPAddress)
        /// Header read; the rest of the pipeline has the bytes.
        case done
        /// Closing; reads are dropped.
        case refused
    }
    private var state = State.idle

    init(trusted: TrustedProxies, timeout: TimeAmount, logger: Logger, onHeader: @escaping OnHeader) {
        self.trusted = trusted
        self.timeout = timeout
        self.logger = logger
        self.onHeader = onHeader
    }

    func handlerAdded(context: ChannelHandlerContext) {
        if context.channel.isActive { start(context: context) }
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        timer?.cancel()
        timer = nil
    }

    func channelActive(context: ChannelHandlerContext) {
        start(context: context)
        context.fireChannelActive()
    }

    func channelInactive(context: ChannelHandlerContext) {
        timer?.cancel()
        timer = nil
        context.fireChannelInactive()
    }

    /// Checks the peer and arms the timeout, once.
    private func start(context: ChannelHandlerContext) {
        guard case .idle = state else { return }
        guard let peer = ConnectionAdmission.peerAddress(of: context.channel), trusted.contains(peer) else {
            refuse(context: context, reason: "peer is not a trusted proxy")
            return
        }
        state = .reading(peer: peer)
        let channel = context.channel
        timer = context.eventLoop.scheduleTask(in: timeout) {
            channel.close(promise: nil)
        }
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let peer: IPAddress
        switch state {
        case .reading(let p): peer = p
        case .done: return context.fireChannelRead(data)
        case .idle, .refused: return  // not started (no peer yet) or closing
        }
        var chunk = unwrapInboundIn(data)
        if buffer == nil { buffer = chunk } else { buffer?.writeBuffer(&chunk) }
        guard var bytes = buffer else { return }
        do {
            switch try ProxyProtocolHeader.parse(bytes.readableBytesView) {
            case .needMoreData:
                // The parser asks for more only below its bound; keep that true here too.
                if bytes.readableBytes >= ProxyProtocolHeader.maxHeaderBytes {
                    refuse(context: context, reason: "PROXY header too long")
                }
            case .header(let header, let consumed):
                state = .done
                timer?.cancel()
                timer = nil
                buffer = nil
                bytes.moveReaderIndex(forwardBy: consumed)
                let client = header.source?.address.unmapped ?? peer
                try onHeader(context.channel, client)
                if bytes.readableBytes > 0 {
                    context.fireChannelRead(wrapInboundOut(bytes))
                }
                context.pipeline.syncOperations.removeHandler(context: context, promise: nil)
            }
        } catch let error as ProxyProtocolError {
            refuse(context: context, reason: error.description)
        } catch {
            logger.warning("could not set up the connection after its PROXY header", metadata: ["error": "\(error)"])
            context.close(promise: nil)
        }
    }

    private func refuse(context: ChannelHandlerContext, reason: String) {
        state = .refused
        buffer = nil
        timer?.cancel()
        timer = nil
        logger.debug("connection refused: \(reason)", metadata: ["peer": "\(context.channel.remoteAddress?.description ?? "unknown")"])
        context.close(promise: nil)
    }
}
