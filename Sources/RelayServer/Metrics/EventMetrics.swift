import CoreMetrics
import RelayCore

/// Client events in and out, by name, and the ones refused (rate limits, error budget).
public struct EventMetrics: Sendable {
    private let eventsIn: [String: Counter]
    private let eventsOut: [String: Counter]
    private let rateLimited: [RateClass: Counter]
    let errorBudgetCloses: Counter
    /// `room:sync` answers by result (`ok`, `history_unavailable`).
    let roomSyncs: [String: Counter]

    init(_ r: PrometheusRegistry) {
        r.describe("relay_events_in_total", "Client events received, by event name (custom events as custom)")
        r.describe("relay_events_out_total", "Events written to sockets, by event name")
        r.describe("relay_rate_limited_total", "Events refused with rate_limited, by kind")
        r.describe("relay_error_budget_closes_total", "Connections closed with 1008 after spending their error-reply budget")
        var inC: [String: Counter] = [:]
        var outC: [String: Counter] = [:]
        for name in EventPolicyTable.all.map(\.name).sorted() + ["custom", "invalid", EventPolicyTable.errorEventName] {
            inC[name] = Counter(label: "relay_events_in_total", dimensions: [("event", name)], factory: r)
            outC[name] = Counter(label: "relay_events_out_total", dimensions: [("event", name)], factory: r)
        }
        eventsIn = inC
        eventsOut = outC
        rateLimited = Dictionary(uniqueKeysWithValues: RateClass.allCases.map {
            ($0, Counter(label: "relay_rate_limited_total", dimensions: [("kind", $0.rawValue)], factory: r))
        })
        errorBudgetCloses = Counter(label: "relay_error_budget_closes_total", factory: r)
        roomSyncs = Dictionary(uniqueKeysWithValues: ["ok", "history_unavailable"].map {
            ($0, Counter(label: "relay_room_sync_total", dimensions: [("result", $0)], factory: r))
        })
    }

    func eventIn(_ name: String) { eventsIn[EventPolicyTable.metricLabel(for: name)]?.increment() }
    func eventOut(label: String, count: Int) { eventsOut[label]?.increment(by: Int64(count)) }
    func rateLimit(_ kind: RateClass) { rateLimited[kind]?.increment() }

    var inLabels: [String] { Array(eventsIn.keys) }
    var outLabels: [String] { Array(eventsOut.keys) }
}
