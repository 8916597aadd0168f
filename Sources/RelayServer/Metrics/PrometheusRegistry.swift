import Atomics
import CoreMetrics
import RelayLocks

/// A swift-metrics backend that keeps every metric in lock-free atomics and renders the
/// Prometheus text exposition format (v0.0.4). Written by hand: no Prometheus backend package is
/// reachable here. Creating a metric takes a lock; recording one never does.
/// (`@unchecked Sendable`: the families are only touched inside `state`'s lock; the series
/// handlers are atomics.)
public final class PrometheusRegistry: MetricsFactory, @unchecked Sendable {
    enum Kind: String { case counter, gauge, histogram }

    struct Family {
        var kind: Kind
        var help: String
        var series: [String: AnyObject] = [:]  // rendered label set → handler
        var order: [String] = []
    }

    /// Histogram bucket upper bounds, in seconds, for timers.
    public static let secondsBuckets: [Double] = [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10]
    /// Bucket upper bounds for plain value recorders (sizes, counts).
    public static let valueBuckets: [Double] = [1, 2, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 50000]

    /// The metric families, in the order they were made, with the help texts and buckets
    /// described for them.
    private struct State {
        var families: [String: Family] = [:]
        var familyOrder: [String] = []
        var help: [String: String] = [:]
        var customBuckets: [String: [Double]] = [:]
    }

    private let state = AuditedLock(State())

    public init() {}

    /// Sets the `# HELP` text of a metric (before or after it is created).
    public func describe(_ name: String, _ text: String, buckets: [Double]? = nil) {
        state.withLockedValue { s in
            s.help[name] = text
            s.families[name]?.help = text
            if let buckets { s.customBuckets[name] = buckets }
        }
    }

    static func sanitize(_ label: String) -> String {
        var out = ""
        for (i, c) in label.unicodeScalars.enumerated() {
            let ok = (c >= "a" && c <= "z") || (c >= "A" && c <= "Z") || c == "_" || c == ":" || (i > 0 && c >= "0" && c <= "9")
            out.unicodeScalars.append(ok ? c : "_")
        }
        return out.isEmpty ? "_" : out
    }

    static func labelSet(_ dimensions: [(String, String)]) -> String {
        guard !dimensions.isEmpty else { return "" }
        let parts = dimensions.map { k, v in
            "\(sanitize(k))=\"\(v.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\"").replacingOccurrences(of: "\n", with: "\\n"))\""
        }
        return "{" + parts.joined(separator: ",") + "}"
    }

    private func handler<H: AnyObject>(_ label: String, _ dimensions: [(String, String)], kind: Kind, make: ([Double]) -> H) -> H {
        let name = Self.sanitize(label)
        let key = Self.labelSet(dimensions)
        return state.withLockedValue { s in
            var family = s.families[name] ?? Family(kind: kind, help: s.help[name] ?? name)
            if s.families[name] == nil { s.familyOrder.append(name) }
            if let existing = family.series[key] as? H {
                s.families[name] = family
                return existing
            }
            let h = make(s.customBuckets[name] ?? (kind == .histogram ? Self.secondsBuckets : []))
            family.series[key] = h
            family.order.append(key)
            s.families[name] = family
            return h
        }
    }

    public func makeCounter(label: String, dimensions: [(String, String)]) -> CounterHandler {
        handler(label, dimensions, kind: .counter) { _ in AtomicCounter() }
    }

    public func makeFloatingPointCounter(label: String, dimensions: [(String, String)]) -> FloatingPointCounterHandler {
        handler(label, dimensions, kind: .counter) { _ in AtomicGauge() }
    }

    public func makeMeter(label: String, dimensions: [(String, String)]) -> MeterHandler {
        handler(label, dimensions, kind: .gauge) { _ in AtomicGauge() }
    }

    public func makeRecorder(label: String, dimensions: [(String, String)], aggregate: Bool) -> RecorderHandler {
        if aggregate {
            return handler(label, dimensions, kind: .histogram) { b in AtomicHistogram(buckets: b.isEmpty ? Self.valueBuckets : b, scale: 1) }
        }
        return handler(label, dimensions, kind: .gauge) { _ in AtomicGauge() }
    }

    public func makeTimer(label: String, dimensions: [(String, String)]) -> TimerHandler {
        // Timers record nanoseconds; they are exported in seconds.
        handler(label, dimensions, kind: .histogram) { b in AtomicHistogram(buckets: b, scale: 1e-9) }
    }

    public func destroyCounter(_ handler: CounterHandler) {}
    public func destroyMeter(_ handler: MeterHandler) {}
    public func destroyFloatingPointCounter(_ handler: FloatingPointCounterHandler) {}
    public func destroyRecorder(_ handler: RecorderHandler) {}
    public func destroyTimer(_ handler: TimerHandler) {}

    /// The whole registry in the Prometheus text format.
    public func render() -> String {
        let snapshot = state.withLockedValue { s in s.familyOrder.compactMap { name in s.families[name].map { (name, $0) } } }
        var out = ""
        out.reserveCapacity(8192)
        for (name, family) in snapshot {
            out += "# HELP \(name) \(family.help)\n# TYPE \(name) \(family.kind.rawValue)\n"
            for key in family.order {
                switch family.series[key] {
                case let c as AtomicCounter:
                    out += "\(name)\(key) \(c.value)\n"
                case let g as AtomicGauge:
                    out += "\(name)\(key) \(Self.format(g.value))\n"
                case let h as AtomicHistogram:
                    out += h.render(name: name, labels: key)
                default:
                    break
                }
            }
        }
        return out
    }

    static func format(_ d: Double) -> String {
        if d.isNaN { return "NaN" }
        if d.isInfinite { return d > 0 ? "+Inf" : "-Inf" }
        if d == d.rounded(), abs(d) < 1e15 { return String(Int64(d)) }
        return String(d)
    }

    /// The handler of one series, for reading values back (stats, tests).
    func series(_ label: String, _ dimensions: [(String, String)] = []) -> AnyObject? {
        state.withLockedValue { $0.families[Self.sanitize(label)]?.series[Self.labelSet(dimensions)] }
    }
}

final class AtomicCounter: CounterHandler, Sendable {
    private let atomic = ManagedAtomic<Int64>(0)
    func increment(by amount: Int64) { atomic.wrappingIncrement(by: amount, ordering: .relaxed) }
    func reset() { atomic.store(0, ordering: .relaxed) }
    var value: Int64 { atomic.load(ordering: .relaxed) }
}

/// A double in an atomic word: gauges, floating-point counters, last-value recorders.
final class AtomicGauge: MeterHandler, RecorderHandler, FloatingPointCounterHandler, Sendable {
    private let bits = ManagedAtomic<UInt64>(0.0.bitPattern)
    var value: Double { Double(bitPattern: bits.load(ordering: .relaxed)) }
    func set(_ value: Int64) { set(Double(value)) }
    func set(_ value: Double) { bits.store(value.bitPattern, ordering: .relaxed) }
    func record(_ value: Int64) { set(Double(value)) }
    func record(_ value: Double) { set(value) }
    func increment(by amount: Double) { update { $0 + amount } }
    func decrement(by amount: Double) { update { $0 - amount } }
    func increment(by amount: Int64) { increment(by: Double(amount)) }
    func reset() { set(0.0) }
    private func update(_ f: (Double) -> Double) {
        var old = bits.load(ordering: .relaxed)
        while true {
            let (done, current) = bits.compareExchange(expected: old, desired: f(Double(bitPattern: old)).bitPattern, ordering: .relaxed)
            if done { return }
            old = current
        }
    }
}

/// A fixed-bucket histogram: one atomic per bucket, a count, and a sum kept in the recorded
/// unit (an integer for timers' nanoseconds).
final class AtomicHistogram: RecorderHandler, TimerHandler, Sendable {
    let bounds: [Double]
    /// Multiplies recorded values into the exported unit (1e-9: nanoseconds to seconds).
    let scale: Double
    private let buckets: [ManagedAtomic<Int64>]
    private let countAtomic = ManagedAtomic<Int64>(0)
    private let sumAtomic = ManagedAtomic<Int64>(0)

    init(buckets: [Double], scale: Double) {
        self.bounds = buckets
        self.scale = scale
        self.buckets = buckets.map { _ in ManagedAtomic<Int64>(0) }
    }

    func recordNanoseconds(_ duration: Int64) { record(duration) }

    func record(_ value: Int64) {
        let v = Double(value) * scale
        if let i = bounds.firstIndex(where: { v <= $0 }) { buckets[i].wrappingIncrement(ordering: .relaxed) }
        countAtomic.wrappingIncrement(ordering: .relaxed)
        sumAtomic.wrappingIncrement(by: value, ordering: .relaxed)
    }

    /// Rounded and clamped into Int64 (NaN as 0): a recorded double never traps.
    func record(_ value: Double) {
        let r = value.rounded()
        record(r.isNaN ? 0 : r >= 9.2e18 ? Int64.max : r <= -9.2e18 ? Int64.min : Int64(r))
    }

    var count: Int64 { countAtomic.load(ordering: .relaxed) }
    var sum: Double { Double(sumAtomic.load(ordering: .relaxed)) * scale }

    /// Cumulative counts per bound.
    var cumulative: [Int64] {
        var running: Int64 = 0
        return buckets.map { running += $0.load(ordering: .relaxed); return running }
    }

    /// An estimate of quantile `q` (0…1) by linear interpolation inside the bucket, as
    /// Prometheus' `histogram_quantile` does; in the exported unit.
    func quantile(_ q: Double) -> Double? {
        let total = count
        guard total > 0 else { return nil }
        let rank = q * Double(total)
        var lower = 0.0
        var below: Int64 = 0
        for (i, c) in cumulative.enumerated() {
            if Double(c) >= rank {
                let inBucket = Double(c - below)
                let fraction = inBucket > 0 ? (rank - Double(below)) / inBucket : 1
                return lower + (bounds[i] - lower) * fraction
            }
            lower = bounds[i]
            below = c
        }
        return bounds.last
    }

    func render(name: String, labels: String) -> String {
        let inner = labels.isEmpty ? "" : String(labels.dropFirst().dropLast()) + ","
        var out = ""
        for (bound, c) in zip(bounds, cumulative) {
            out += "\(name)_bucket{\(inner)le=\"\(PrometheusRegistry.format(bound))\"} \(c)\n"
        }
        out += "\(name)_bucket{\(inner)le=\"+Inf\"} \(count)\n"
        out += "\(name)_sum\(labels) \(PrometheusRegistry.format(sum))\n"
        out += "\(name)_count\(labels) \(count)\n"
        return out
    }
}
