import Atomics

/// Counts the per-connection objects that are alive, whatever state they ended in: a session,
/// a long-polling transport, a WebSocket transport. The leak check: after every connection
/// ended (logged in or not, on either transport) these return to zero, which `/metrics`
/// (`relay_live_objects`) and the tests read. One relaxed atomic add at creation and one at
/// release: never on the per-message path.
enum LiveObjects {
    enum Kind: String, CaseIterable {
        case session
        case pollingTransport = "polling_transport"
        case webSocketTransport = "websocket_transport"
    }

    private static let sessions = ManagedAtomic<Int>(0)
    private static let pollingTransports = ManagedAtomic<Int>(0)
    private static let webSocketTransports = ManagedAtomic<Int>(0)
    /// Sessions released and TCP connections closed since the process started
    /// (`HeapTrimmer` trims after churn).
    private static let churnCount = ManagedAtomic<Int>(0)

    private static func counter(_ kind: Kind) -> ManagedAtomic<Int> {
        switch kind {
        case .session: return sessions
        case .pollingTransport: return pollingTransports
        case .webSocketTransport: return webSocketTransports
        }
    }

    static func created(_ kind: Kind) { counter(kind).wrappingIncrement(ordering: .relaxed) }
    static func released(_ kind: Kind) {
        counter(kind).wrappingDecrement(ordering: .relaxed)
        if kind == .session { churnCount.wrappingIncrement(ordering: .relaxed) }
    }

    /// A TCP connection closed (whatever it carried).
    static func connectionClosed() { churnCount.wrappingIncrement(ordering: .relaxed) }

    /// Sessions ended plus connections closed so far.
    static var churn: Int { churnCount.load(ordering: .relaxed) }
    static func count(_ kind: Kind) -> Int { counter(kind).load(ordering: .relaxed) }

    /// Prometheus text for `/metrics`.
    static func render() -> String {
        var out = "# HELP relay_live_objects Per-connection objects alive in this process (leak check: 0 once every connection ended)\n# TYPE relay_live_objects gauge\n"
        for kind in Kind.allCases { out += "relay_live_objects{kind=\"\(kind.rawValue)\"} \(count(kind))\n" }
        return out
    }
}
