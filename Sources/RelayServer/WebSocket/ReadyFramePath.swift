import NIOCore

/// The context of NIO's WebSocket frame encoder, from which a socket writes the frames a fan-out
/// made once for all recipients (`PreparedFrames`), as plain bytes past the encoder; and the
/// addresses of what such a write touches first (the context, its pipeline and channel), so a
/// fan-out can ask the CPU for them a few members ahead without touching them.
struct ReadyFramePath {
    let context: ChannelHandlerContext
    private let addresses: (context: UnsafeRawPointer, pipeline: UnsafeRawPointer, channel: UnsafeRawPointer)

    init(_ context: ChannelHandlerContext) {
        self.context = context
        self.addresses = (Prefetch.address(of: context), Prefetch.address(of: context.pipeline), Prefetch.address(of: context.channel))
    }

    @inline(__always)
    func prefetch() {
        Prefetch.lines(addresses.context, count: 2)
        Prefetch.lines(addresses.pipeline, count: 2)
        // The channel holds the socket, its pending writes and their bookkeeping.
        Prefetch.lines(addresses.channel, count: 8)
    }
}
