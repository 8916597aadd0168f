import CoreMetrics
import RelayCore

/// Every metric Relay exports, created once (label sets are bounded: known event names plus
/// `custom` and `invalid`, known reasons and codes), so recording is a dictionary read and an
/// atomic add — never a lock.
public final class RelayMetrics: Sendable {
    public let registry: PrometheusRegistry

    let connections: Meter
    let connectsOK: Counter
    let connectsRefused: Counter
    private let disconnects: [String: Counter]
    private let eventsIn: [String: Counter]
    private let eventsOut: [String: Counter]
    let deliveries: Counter
    let coalesced: Counter
    let dropped: Counter
    let slowConsumerCloses: Counter
    /// Heap trims after connection churn (`HeapTrimmer`).
    let heapTrims: Counter
    let errorBudgetCloses: Counter
    let receiptQuotaRefusals: Counter
    let receiptCommit: Timer
    let receiptBatch: Recorder
    let receiptsStored: Counter
    private let authFailures: [RelayErrorCode: Counter]
    private let rateLimited: [RateClass: Counter]
    let eventLoopLag: Timer
    let fanoutLatency: Timer
    let rooms: Meter
    let redisLinkUp: Meter
    let redisDegraded: Counter
    /// Coalesced backend emits replaced by a later one within their window (never sent).
    let emitsSuperseded: Counter
    /// Connection state recoveries by result (`RecoveryResult.metricLabel`).
    let recoveries: [String: Counter]
    /// `room:sync` answers by result (`ok`, `history_unavailable`).
    let roomSyncs: [String: Counter]
    /// This node's memory history (events, bytes), set at each scrape.
    let historyEvents: Meter
    let historyBytes: Meter
    /// `auth:refresh` by result (`ok`, `refused`).
    let tokenRefreshes: [String: Counter]
    /// Sockets ended by the backend (`POST /api/v1/users/{user}/disconnect`), on this node.
    let sessionsEnded: Counter
    static let recoveryResults = RecoveryResult.allCases.map(\.metricLabel)

    /// `relay_disconnects_total`'s reasons: one per `ConnectionEnd`.
    public static let disconnectReasons = ConnectionEnd.allCases.map(\.metricLabel)

    public init(registry: PrometheusRegistry = PrometheusRegistry()) {
        self.registry = registry
        let r = registry
        r.describe("relay_connections", "Open Socket.IO sessions")
        r.describe("relay_connects_total", "Socket.IO CONNECT attempts by result")
        r.describe("relay_disconnects_total", "Closed sessions by reason")
        r.describe("relay_events_in_total", "Client events received, by event name (custom events as custom)")
        r.describe("relay_events_out_total", "Events written to sockets, by event name")
        r.describe("relay_deliveries_total", "Messages handed to sockets by fan-out")
        r.describe("relay_coalesced_total", "Queued events replaced by a newer one with the same key (backpressure)")
        r.describe("relay_dropped_total", "Queued events discarded because their connection closed")
        r.describe("relay_slow_consumer_closes_total", "Connections closed with 4008 because their outbound queue passed its hard limit")
        r.describe("relay_error_budget_closes_total", "Connections closed with 1008 after spending their error-reply budget")
        r.describe("relay_receipt_quota_refusals_total", "Receipts refused because the user's or the connection's receipt quota was spent")
        r.describe("relay_receipt_commit_seconds", "Time to commit one batch of receipts")
        r.describe("relay_receipt_batch_size", "Receipts per committed transaction", buckets: [1, 2, 5, 10, 25, 50, 100, 250, 500, 1000, 2500])
        r.describe("relay_receipts_stored_total", "Receipts committed (new ones)")
        r.describe("relay_auth_failures_total", "Refused authentications by code")
        r.describe("relay_rate_limited_total", "Events refused with rate_limited, by kind")
        r.describe("relay_event_loop_lag_seconds", "How late a 500 ms timer fires on each event loop")
        r.describe("relay_fanout_seconds", "From an event's publication to its write on a recipient loop")
        r.describe("relay_rooms", "Rooms with at least one member")
        r.describe("relay_redis_link_up", "1 when the Redis link is up (0 when configured and down)")
        r.describe("relay_redis_degraded_total", "Events delivered node-locally because Redis was down")
        r.describe("relay_emits_superseded_total", "Coalesced backend emits replaced by a later one of the same key within the window")

        connections = Meter(label: "relay_connections", factory: r)
        connectsOK = Counter(label: "relay_connects_total", dimensions: [("result", "ok")], factory: r)
        connectsRefused = Counter(label: "relay_connects_total", dimensions: [("result", "refused")], factory: r)
        var d: [String: Counter] = [:]
        for reason in Self.disconnectReasons { d[reason] = Counter(label: "relay_disconnects_total", dimensions: [("reason", reason)], factory: r) }
        disconnects = d
        var inC: [String: Counter] = [:]
        var outC: [String: Counter] = [:]
        for name in EventPolicyTable.all.map(\.name).sorted() + ["custom", "invalid", EventPolicyTable.errorEventName] {
            inC[name] = Counter(label: "relay_events_in_total", dimensions: [("event", name)], factory: r)
            outC[name] = Counter(label: "relay_events_out_total", dimensions: [("event", name)], factory: r)
        }
        eventsIn = inC
        eventsOut = outC
        deliveries = Counter(label: "relay_deliveries_total", factory: r)
        coalesced = Counter(label: "relay_coalesced_total", factory: r)
        dropped = Counter(label: "relay_dropped_total", factory: r)
        slowConsumerCloses = Counter(label: "relay_slow_consumer_closes_total", factory: r)
        heapTrims = Counter(label: "relay_heap_trims_total", factory: r)
        errorBudgetCloses = Counter(label: "relay_error_budget_closes_total", factory: r)
        receiptQuotaRefusals = Counter(label: "relay_receipt_quota_refusals_total", factory: r)
        receiptCommit = Timer(label: "relay_receipt_commit_seconds", factory: r)
        receiptBatch = Recorder(label: "relay_receipt_batch_size", aggregate: true, factory: r)
        receiptsStored = Counter(label: "relay_receipts_stored_total", factory: r)
        var a: [RelayErrorCode: Counter] = [:]
        for code in RelayErrorCode.allCases where code.rawValue.hasPrefix("token_") || code == .authRateLimited || code == .tooManyConnections {
            a[code] = Counter(label: "relay_auth_failures_total", dimensions: [("code", code.rawValue)], factory: r)
        }
        authFailures = a
        var rl: [RateClass: Counter] = [:]
        for c in RateClass.allCases { rl[c] = Counter(label: "relay_rate_limited_total", dimensions: [("kind", c.rawValue)], factory: r) }
        rateLimited = rl
        eventLoopLag = Timer(label: "relay_event_loop_lag_seconds", factory: r)
        fanoutLatency = Timer(label: "relay_fanout_seconds", factory: r)
        rooms = Meter(label: "relay_rooms", factory: r)
        redisLinkUp = Meter(label: "relay_redis_link_up", factory: r)
        redisDegraded = Counter(label: "relay_redis_degraded_total", factory: r)
        emitsSuperseded = Counter(label: "relay_emits_superseded_total", factory: r)
        recoveries = Dictionary(uniqueKeysWithValues: Self.recoveryResults.map { ($0, Counter(label: "relay_recoveries_total", dimensions: [("result", $0)], factory: r)) })
        roomSyncs = Dictionary(uniqueKeysWithValues: ["ok", "history_unavailable"].map { ($0, Counter(label: "relay_room_sync_total", dimensions: [("result", $0)], factory: r)) })
        historyEvents = Meter(label: "relay_history_events", factory: r)
        tokenRefreshes = Dictionary(uniqueKeysWithValues: ["ok", "refused"].map { ($0, Counter(label: "relay_token_refreshes_total", dimensions: [("result", $0)], factory: r)) })
        sessionsEnded = Counter(label: "relay_sessions_ended_total", factory: r)
        historyBytes = Meter(label: "relay_history_bytes", factory: r)
    }

    func recovery(_ result: RecoveryResult) { recoveries[result.metricLabel]?.increment() }

    /// The Redis side's metrics.
    public var cluster: ClusterMetrics { ClusterMetrics(linkUp: redisLinkUp, degraded: redisDegraded) }

    func eventIn(_ name: String) { eventsIn[EventPolicyTable.metricLabel(for: name)]?.increment() }
    func eventOut(label: String, count: Int) { eventsOut[label]?.increment(by: Int64(count)) }
    func disconnect(_ end: ConnectionEnd) { disconnects[end.metricLabel]?.increment() }
    func authFailure(_ code: RelayErrorCode) { authFailures[code]?.increment() }
    func rateLimit(_ kind: RateClass) { rateLimited[kind]?.increment() }

    // MARK: Reading back (admin stats, dashboard)

    func counterValue(_ label: String, _ dimensions: [(String, String)] = []) -> Int64 {
        (registry.series(label, dimensions) as? AtomicCounter)?.value ?? 0
    }

    func counterSum(_ label: String, dimension: String, values: [String]) -> Int64 {
        values.reduce(0) { $0 + counterValue(label, [(dimension, $1)]) }
    }

    var eventsInTotal: Int64 { counterSum("relay_events_in_total", dimension: "event", values: Array(eventsIn.keys)) }
    var eventsOutTotal: Int64 { counterSum("relay_events_out_total", dimension: "event", values: Array(eventsOut.keys)) }

    func histogram(_ label: String) -> AtomicHistogram? { registry.series(label) as? AtomicHistogram }
}
