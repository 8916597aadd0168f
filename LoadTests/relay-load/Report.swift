import Foundation
import Histogram

/// One scenario's result: ordered rows for the table, the same values for `--json`.
struct Report {
    var scenario: String
    var rows: [(String, Value)] = []
    var failed = false

    enum Value {
        case int(Int)
        case double(Double, String)
        case text(String)

        var json: Any {
            switch self {
            case .int(let i): return i
            case .double(let d, _): return d.isFinite ? (d * 1000).rounded() / 1000 : 0
            case .text(let s): return s
            }
        }

        var display: String {
            switch self {
            case .int(let i): return String(i)
            case .double(let d, let unit): return String(format: "%.3f", d) + (unit.isEmpty ? "" : " \(unit)")
            case .text(let s): return s
            }
        }
    }

    init(_ scenario: String) { self.scenario = scenario }

    mutating func add(_ key: String, _ value: Int) { rows.append((key, .int(value))) }
    mutating func add(_ key: String, _ value: Double, _ unit: String = "") { rows.append((key, .double(value, unit))) }
    mutating func add(_ key: String, _ value: String) { rows.append((key, .text(value))) }

    /// p50/p99/p999/max of a µs histogram, in ms.
    mutating func addLatency(_ prefix: String, _ h: Histogram<UInt64>) {
        guard h.totalCount > 0 else {
            add("\(prefix)_samples", 0)
            return
        }
        add("\(prefix)_samples", Int(h.totalCount))
        add("\(prefix)_p50_ms", Double(h.valueAtPercentile(50)) / 1000, "ms")
        add("\(prefix)_p99_ms", Double(h.valueAtPercentile(99)) / 1000, "ms")
        add("\(prefix)_p999_ms", Double(h.valueAtPercentile(99.9)) / 1000, "ms")
        add("\(prefix)_max_ms", Double(h.max) / 1000, "ms")
    }

    func render(json: Bool) -> String {
        if json {
            var dict: [String: Any] = ["scenario": scenario, "failed": failed]
            for (k, v) in rows { dict[k] = v.json }
            let data = (try? JSONSerialization.data(withJSONObject: dict, options: [.sortedKeys])) ?? Data()
            return String(decoding: data, as: UTF8.self)
        }
        let width = max(10, rows.map(\.0.count).max() ?? 10)
        var out = "scenario: \(scenario)\(failed ? "  (FAILED)" : "")\n"
        for (k, v) in rows { out += k.padding(toLength: width, withPad: " ", startingAt: 0) + "  " + v.display + "\n" }
        return out
    }
}
