/// Which transport carries a session, and how far a polling session's upgrade is: each case
/// carries its own deadline or window, so a probe's deadline cannot outlive the probe.
public enum UpgradeState: Sendable, Equatable {
    /// Long-polling, no WebSocket probing.
    case polling
    /// Long-polling, while a WebSocket probes the upgrade until `deadline` (monotonic ms).
    case probing(deadline: Int64)
    /// WebSocket: opened as one (an idle handover), or upgraded, its polling requests still
    /// taken for the handover's window.
    case websocket(UpgradeHandover)

    /// The transport packets of the session go out on.
    public var transport: EngineSession.Transport {
        switch self {
        case .polling, .probing: return .polling
        case .websocket: return .websocket
        }
    }

    public var isProbing: Bool {
        if case .probing = self { return true }
        return false
    }

    /// Whether a polling request at `now` is the session's: polling is its transport, or it
    /// moved to WebSocket so recently that the client may have sent the request before the `5`.
    public func acceptsPolling(now: Int64) -> Bool {
        switch self {
        case .polling, .probing: return true
        case .websocket(let handover): return handover.isOpen(now: now)
        }
    }

    /// A Socket.IO packet (not a CONNECT) on the WebSocket of a session awaiting its first
    /// CONNECT, while that CONNECT may still come by polling: it waits for it.
    func mayHoldForLateConnect(_ packet: ArraySlice<UInt8>, now: Int64) -> Bool {
        guard acceptsPolling(now: now) else { return false }
        var bytes = packet.makeIterator()
        guard bytes.next() == UInt8(ascii: "4") else { return false }
        return bytes.next() != UInt8(ascii: "0")
    }

    /// Keeps `packet` in the WebSocket's handover until a late CONNECT by polling; `false` when
    /// its bounds are reached (take it now) or there is no handover.
    mutating func holdForLateConnect(_ packet: ArraySlice<UInt8>) -> Bool {
        guard case .websocket(var handover) = self else { return false }
        self = .polling  // out of the enum while it changes: no copy of what it holds
        defer { self = .websocket(handover) }
        return handover.hold(packet)
    }

    var isHoldingForLateConnect: Bool {
        if case .websocket(let handover) = self { return handover.isHolding }
        return false
    }
}
