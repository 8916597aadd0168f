import CoreMetrics
import RelayCore

/// Sessions opened, refused and ended.
public struct ConnectionMetrics: Sendable {
    let open: Meter
    let connectsOK: Counter
    let connectsRefused: Counter
    private let disconnects: [String: Counter]
    private let authFailures: [RelayErrorCode: Counter]
    /// Sockets ended by the backend (`POST /api/v1/users/{user}/disconnect`), on this node.
    let sessionsEnded: Counter
    /// `auth:refresh` by result (`ok`, `refused`).
    let tokenRefreshes: [String: Counter]
    /// Connection state recoveries by result (`RecoveryResult.metricLabel`).
    private let recoveries: [String: Counter]
    /// CONNECTs being set up (`PendingConnects`).
    let pendingConnects: Meter
    /// New sessions refused at their handshake because too many CONNECTs were pending.
    let handshakesShed: Counter

    /// `relay_disconnects_total`'s reasons: one per `ConnectionEnd`.
    static let disconnectReasons = ConnectionEnd.allCases.map(\.metricLabel)

    init(_ r: PrometheusRegistry) {
        r.describe("relay_connections", "Open Socket.IO sessions")
        r.describe("relay_connects_total", "Socket.IO CONNECT attempts by result")
        r.describe("relay_disconnects_total", "Closed sessions by reason")
        r.describe("relay_auth_failures_total", "Refused authentications by code")
        r.describe("relay_pending_connects", "CONNECTs being set up (token, rooms, recovery)")
        r.describe("relay_handshakes_shed_total", "New sessions refused (HTTP 503 server_busy) because too many CONNECTs were pending")
        pendingConnects = Meter(label: "relay_pending_connects", factory: r)
        handshakesShed = Counter(label: "relay_handshakes_shed_total", factory: r)
        open = Meter(label: "relay_connections", factory: r)
        connectsOK = Counter(label: "relay_connects_total", dimensions: [("result", "ok")], factory: r)
        connectsRefused = Counter(label: "relay_connects_total", dimensions: [("result", "refused")], factory: r)
        disconnects = Dictionary(uniqueKeysWithValues: Self.disconnectReasons.map {
            ($0, Counter(label: "relay_disconnects_total", dimensions: [("reason", $0)], factory: r))
        })
        var a: [RelayErrorCode: Counter] = [:]
        for code in RelayErrorCode.allCases where code.rawValue.hasPrefix("token_") || code == .authRateLimited || code == .tooManyConnections {
            a[code] = Counter(label: "relay_auth_failures_total", dimensions: [("code", code.rawValue)], factory: r)
        }
        authFailures = a
        sessionsEnded = Counter(label: "relay_sessions_ended_total", factory: r)
        tokenRefreshes = Dictionary(uniqueKeysWithValues: ["ok", "refused"].map {
            ($0, Counter(label: "relay_token_refreshes_total", dimensions: [("result", $0)], factory: r))
        })
        recoveries = Dictionary(uniqueKeysWithValues: RecoveryResult.allCases.map(\.metricLabel).map {
            ($0, Counter(label: "relay_recoveries_total", dimensions: [("result", $0)], factory: r))
        })
    }

    func disconnect(_ end: ConnectionEnd) { disconnects[end.metricLabel]?.increment() }
    func authFailure(_ code: RelayErrorCode) { authFailures[code]?.increment() }
    func recovery(_ result: RecoveryResult) { recoveries[result.metricLabel]?.increment() }
}
