/// What a `PollingTransport` tells its owner (the polling endpoint wires them to the session,
/// the sid table and the metrics).
struct PollingObservers {
    /// The buffer passed its bound, or the client polled twice at once: the owner closes.
    var onViolation: ((UInt16, String) -> Void)?
    /// The transport ended (the session closed, or the WebSocket took over).
    var onClosed: (() -> Void)?
    /// The owed close (and what was buffered before it, e.g. a CONNECT refusal) was taken.
    var onCloseDelivered: (() -> Void)?
    /// Counted as lost when a session ends with messages still waiting.
    var onDropped: ((Int) -> Void)?
    /// Counted when a coalescible message replaced its older twin.
    var onCoalesced: (() -> Void)?
}
