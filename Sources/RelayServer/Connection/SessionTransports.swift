/// A session's transport and the WebSocket probed to replace it (a polling session upgrading).
///
/// Only data: calls into a transport may come back into the session (a close reports
/// `transportClosed`), so `ClientSession` makes them itself, never from inside a mutation here.
struct SessionTransports {
    /// The current transport; `nil` once the session ended.
    var current: (any SessionTransport)? {
        didSet { address = current.map { Prefetch.address(of: $0) } }
    }
    /// The current transport's address, for a fan-out to prefetch it without touching it.
    private(set) var address: UnsafeRawPointer?
    /// The WebSocket being probed to replace the polling transport.
    var probe: (any SessionTransport)?
    /// A flush of the current transport is scheduled after the tasks already queued on the loop.
    var flushScheduled = false

    /// Whether `id` names the probe.
    func isProbe(_ id: ObjectIdentifier) -> Bool {
        probe.map { ObjectIdentifier($0) == id } ?? false
    }

    /// Whether `id` names the current transport.
    func isCurrent(_ id: ObjectIdentifier) -> Bool {
        current.map { ObjectIdentifier($0) == id } ?? false
    }

    /// The probe, no longer kept.
    mutating func takeProbe() -> (any SessionTransport)? {
        defer { probe = nil }
        return probe
    }
}
