import Foundation
import XCTest

@testable import RelayServer

/// Each setting's default is declared once, in `ConfigurationLoader.settings`: a property a
/// setting with a default writes starts at zero (0, false, empty, nil) in the type that holds
/// it, so no second default can drift from the table. The properties a setting writes are found
/// by writing its default into the unfilled configuration and seeing which leaves change.
final class SettingsDeclaredOnceTests: XCTestCase {
    func testEveryPropertyASettingWritesStartsAtZero() throws {
        let blank = RelayConfiguration(unfilledJWT: .hs256(secret: String(repeating: "s", count: 32)), apiKey: "k", adminKey: "k")
        let before = Self.leaves(of: blank)
        var checked = 0
        for setting in ConfigurationLoader.settings {
            guard let value = setting.defaultValue else { continue }
            var filled = blank
            XCTAssertEqual(setting.apply(value, &filled), [], setting.name)
            let after = Self.leaves(of: filled)
            // What the setting writes: what its default changes, and what another valid value
            // changes (a second default equal to the table's changes nothing when written).
            var written = Set(after.keys.filter { after[$0] != before[$0] })
            for other in Self.otherValues(than: value, kind: setting.kind) {
                var changed = blank
                guard setting.apply(other, &changed).isEmpty else { continue }
                let leaves = Self.leaves(of: changed)
                written.formUnion(leaves.keys.filter { leaves[$0] != after[$0] })
                break
            }
            for path in written {
                checked += 1
                let declared = before[path] ?? "nil"
                XCTAssertTrue(
                    Self.isZero(declared),
                    "\(setting.name) writes \(path), whose type declares \(declared) of its own: a second default (start it at zero)")
            }
        }
        XCTAssertGreaterThan(checked, 50, "the settings' properties were found")
    }

    /// Valid-looking values other than `value`, tried in order.
    static func otherValues(than value: String, kind: ConfigurationLoader.Setting.Kind) -> [String] {
        switch kind {
        case .int:
            let n = Int(value) ?? 0
            return [n + 1, n * 2, n - 1, 1].filter { $0 != n }.map(String.init)
        case .double:
            let n = Double(value) ?? 0
            return [n + 1, n * 2].filter { $0 != n }.map { String(Int($0)) }
        case .bool:
            return [value == "true" ? "false" : "true"]
        case .string, .list:
            return []
        }
    }

    /// Every leaf of `value` by its path (`engine.maxPayload`, `events.inbound.packets.burst`).
    static func leaves(of value: Any, path: String = "") -> [String: String] {
        let mirror = Mirror(reflecting: value)
        switch mirror.displayStyle {
        case .struct, .class:
            guard !mirror.children.isEmpty else { return [path: String(describing: value)] }
            var out: [String: String] = [:]
            for child in mirror.children {
                let name = child.label ?? "?"
                out.merge(leaves(of: child.value, path: path.isEmpty ? name : path + "." + name)) { a, _ in a }
            }
            return out
        default:
            return [path: String(describing: value)]
        }
    }

    /// 0, 0.0, false, "", [], [:], nil, or a value made only of those.
    static func isZero(_ description: String) -> Bool {
        description.range(of: "[1-9]|true", options: .regularExpression) == nil
            && !description.contains("Optional(\"")
            && description.range(of: "\"[^\"]+\"", options: .regularExpression) == nil
    }
}
