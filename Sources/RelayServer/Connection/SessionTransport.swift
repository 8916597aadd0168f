import RelayCore

/// Where a `ClientSession` writes: a WebSocket, or the long-polling buffer. Every method is
/// called on the session's event loop; a transport on another loop hops itself.
protocol SessionTransport: AnyObject {
    /// Queues or writes one Engine.IO packet; does not flush.
    func send(_ message: OutboundMessage)
    /// Flushes what `send` wrote.
    func flush()
    /// Ends the transport with a WebSocket close code (polling answers its pending request and
    /// forgets the session). The transport reports back through `ClientSession.transportClosed`.
    func close(code: UInt16, reason: String)
    /// The session's inbound limits in force changed (CONNECT succeeded, or a `41`): enforce
    /// these from now on.
    func apply(_ limits: LimitsInForce)
    /// Asks the CPU for the objects a write touches, just before a fan-out writes (`Prefetch`).
    func prefetchChannel()

    // A long-polling transport's part in the move to a WebSocket (nothing for a WebSocket):
    /// The probe failed or closed before the upgrade: `GET`s are held again.
    func probeEnded()
    /// An upgrade probe answered `3probe`: the held `GET` (and every later one) gets a noop.
    func releasePendingPoll()
    /// What it still holds for the client, handed to the WebSocket that replaces it.
    func takeUnsent() -> [OutboundMessage]
    /// Replaced by the WebSocket: answers what it holds and forgets the session.
    func closeForUpgrade()
}

extension SessionTransport {
    func prefetchChannel() {}
    func apply(_ limits: LimitsInForce) {}
    func probeEnded() {}
    func releasePendingPoll() {}
    func takeUnsent() -> [OutboundMessage] { [] }
    func closeForUpgrade() {}
}
