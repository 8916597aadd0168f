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
}
