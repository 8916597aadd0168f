import RelayCore

/// The delivery end of one connection. Every method is called on the connection's event loop.
public protocol ConnectionSink: AnyObject {
    var connectionID: ConnectionID { get }
    /// Queues or writes a message; does not flush.
    func enqueue(_ message: OutboundMessage)
    /// Flushes what `enqueue` wrote.
    func flushOutbound()
    /// Closes the connection with a WebSocket close code and reason.
    func close(code: UInt16, reason: String)
    /// Tells the client to go because the server is shutting down (Engine.IO close, then 1001).
    func goAway()
    /// A close was already started.
    var isClosing: Bool { get }
    /// This connection's token allows `room`: it may see the room's receipts even when it has
    /// not joined it (the author's other devices).
    func mayAccess(room: String) -> Bool
    /// The client reconnected with this session's private `pid` while this connection still
    /// looks alive (its drop not noticed yet): if the pid and user match, close this connection
    /// and keep the session for recovery now. Whether it was handed over.
    func handOver(pid: String, user: String) -> Bool
    /// Asks the CPU for this connection's transport object, a few members before a fan-out
    /// reaches it (`Prefetch`). Reads only this object.
    func prefetchTransport()
    /// Asks the CPU for the objects a write to this connection's channel touches, just before
    /// a fan-out reaches it. Reads only this object and its transport.
    func prefetchChannel()
}

extension ConnectionSink {
    public func handOver(pid: String, user: String) -> Bool { false }
    public func prefetchTransport() {}
    public func prefetchChannel() {}
    public func goAway() { close(code: 1001, reason: "server shutting down") }
}
