import RelayCore

/// Where a `SocketSession` writes: a WebSocket, or the long-polling buffer. Every method is
/// called on the session's event loop; a transport on another loop hops itself.
protocol SessionTransport: AnyObject {
    /// Queues or writes one Engine.IO packet; does not flush.
    func send(_ message: OutboundMessage)
    /// Flushes what `send` wrote.
    func flush()
    /// Ends the transport with a WebSocket close code (polling answers its pending request and
    /// forgets the session). The transport reports back through `SocketSession.transportClosed`.
    func close(code: UInt16, reason: String)
    /// CONNECT succeeded: lift the pre-authentication limits.
    func authenticated()
    /// Asks the CPU for the objects a write touches, just before a fan-out writes (`Prefetch`).
    func prefetchChannel()
}

extension SessionTransport {
    func prefetchChannel() {}
}
