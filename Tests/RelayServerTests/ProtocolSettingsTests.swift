import Foundation
import XCTest

@testable import RelayServer

/// docs/PROTOCOL.md names settings as `--flag`s. Each must be one that `relay serve` accepts (its
/// name is in `ConfigurationLoader.settings`), and §9's limits table must give each listed
/// setting's declared default.
///
/// The reverse is not required: PROTOCOL.md names the settings that bear on the protocol, not
/// every one (`host`, `db`, `log-format`, … are absent on purpose). README's table lists them
/// all (`ReadmeSettingsTableTests`).
final class ProtocolSettingsTests: XCTestCase {
    /// Flags in PROTOCOL.md that belong to another command, with the reason. Keep it minimal:
    /// a flag listed here must still appear in the document, and only on that command's line.
    static let otherCommands: [(flag: String, command: String, why: String)] = [
        // §2 shows `relay token --secret S --sub alice --rooms '…' --ttl 3600`: the development
        // token printer (Sources/relay/TokenCommand.swift). Its options are its own, not
        // `relay serve`'s: `--secret` is the HS256 key to sign with,
        ("secret", "relay token", "the key `relay token` signs with"),
        // `--sub` the token's subject,
        ("sub", "relay token", "the subject of the token `relay token` prints"),
        // `--rooms` its `rooms` claim (CONNECT rooms are an auth field, not a setting),
        ("rooms", "relay token", "the `rooms` claim of the token `relay token` prints"),
        // and `--ttl` its lifetime in seconds.
        ("ttl", "relay token", "the lifetime of the token `relay token` prints"),
    ]

    static func protocolDocument() throws -> String {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        return try String(contentsOf: root.appendingPathComponent("docs/PROTOCOL.md"), encoding: .utf8)
    }

    /// Every `--name` in `text` (in backticks or not), in order. Not `<!--`, not a `---` rule.
    static func flags(in text: String) -> [(name: String, range: Range<String.Index>)] {
        let pattern = try! NSRegularExpression(pattern: "(?<![A-Za-z0-9_!-])--([A-Za-z0-9][A-Za-z0-9_-]*)")
        return pattern.matches(in: text, range: NSRange(text.startIndex..., in: text)).compactMap { match in
            guard let whole = Range(match.range, in: text), let name = Range(match.range(at: 1), in: text) else { return nil }
            // A flag at the end of a sentence or a dash-joined phrase ("--foo-") keeps no trailing dash.
            var trimmed = String(text[name])
            while trimmed.hasSuffix("-") { trimmed.removeLast() }
            return (trimmed, whole)
        }
    }

    func testEveryFlagTheDocumentNamesIsASettingOfRelayServe() throws {
        let document = try Self.protocolDocument()
        let declared = Set(ConfigurationLoader.settings.map(\.name))
        let excluded = Dictionary(uniqueKeysWithValues: Self.otherCommands.map { ($0.flag, $0) })
        var named: Set<String> = []
        for (number, line) in document.components(separatedBy: "\n").enumerated() {
            for flag in Self.flags(in: line) {
                named.insert(flag.name)
                if let other = excluded[flag.name] {
                    // Excluded only where that command is what the line shows, before the flag.
                    let before = line[..<flag.range.lowerBound]
                    XCTAssertTrue(
                        before.contains(other.command),
                        "PROTOCOL.md:\(number + 1) names --\(flag.name) outside `\(other.command)` (excluded as \(other.why)); is it meant as a setting?\n\(line)")
                    XCTAssertFalse(declared.contains(flag.name), "--\(flag.name) is a setting now: drop it from otherCommands")
                } else {
                    XCTAssertTrue(
                        declared.contains(flag.name),
                        "PROTOCOL.md:\(number + 1) names --\(flag.name), which `relay serve` does not accept (not in ConfigurationLoader.settings)\n\(line)")
                }
            }
        }
        for other in Self.otherCommands where !named.contains(other.flag) {
            XCTFail("PROTOCOL.md no longer names --\(other.flag): drop it from otherCommands")
        }
        XCTAssertTrue(named.contains("max-payload"), "the scan found PROTOCOL.md's flags (\(named.count))")
    }

    // MARK: - §9's limits table

    /// The cells of a Markdown table row (`\|` does not split).
    static func cells(_ line: String) -> [String]? {
        let trimmed = line.trimmingCharacters(in: .whitespaces)
        guard trimmed.hasPrefix("|") else { return nil }
        var cells: [String] = []
        var cell = ""
        var escaped = false
        for character in trimmed.dropFirst() {
            if character == "|" && !escaped {
                cells.append(cell.trimmingCharacters(in: .whitespaces))
                cell = ""
            } else {
                cell.append(character)
            }
            escaped = character == "\\"
        }
        if !cell.trimmingCharacters(in: .whitespaces).isEmpty { cells.append(cell.trimmingCharacters(in: .whitespaces)) }
        return cells
    }

    enum Dimension: Equatable { case count, bytes, milliseconds }

    /// The quantities a default cell states, in order, outside parentheses (which explain, not
    /// state): `1 000 000 B` → 1000000 bytes, `64 KiB` → 65536 bytes, `10 s` → 10000 ms,
    /// `50/s, burst 100` → 50, 100.
    static func quantities(in cell: String) -> [(value: Double, dimension: Dimension)] {
        var text = cell
        let parenthesis = try! NSRegularExpression(pattern: "\\([^()]*\\)")
        while parenthesis.firstMatch(in: text, range: NSRange(text.startIndex..., in: text)) != nil {
            text = parenthesis.stringByReplacingMatches(in: text, range: NSRange(text.startIndex..., in: text), withTemplate: "")
        }
        let quantity = try! NSRegularExpression(pattern: "(\\d+(?: \\d{3})*(?:\\.\\d+)?)(?:\\s*(GiB|MiB|KiB|B|ms|s)\\b)?")
        return quantity.matches(in: text, range: NSRange(text.startIndex..., in: text)).compactMap { match in
            guard let digits = Range(match.range(at: 1), in: text), let value = Double(text[digits].replacingOccurrences(of: " ", with: "")) else { return nil }
            switch Range(match.range(at: 2), in: text).map({ String(text[$0]) }) {
            case "GiB": return (value * 1_073_741_824, .bytes)
            case "MiB": return (value * 1_048_576, .bytes)
            case "KiB": return (value * 1024, .bytes)
            case "B": return (value, .bytes)
            case "s": return (value * 1000, .milliseconds)
            case "ms": return (value, .milliseconds)
            default: return (value, .count)
            }
        }
    }

    /// The declared default in milliseconds, for a setting of time (its name or help says the unit).
    static func milliseconds(_ setting: ConfigurationLoader.Setting, _ value: Double) -> Double? {
        if setting.name.hasSuffix("-ms") || setting.help.contains(", ms") { return value }
        if setting.name.hasSuffix("-s") || setting.help.contains("seconds") { return value * 1000 }
        return nil
    }

    /// `Setting` exposes its default (`defaultValue`, as typed after the flag), so each default
    /// the table gives is compared with it. A row's flags take the cell's quantities in order
    /// (`50/s, burst 100` for `--events-per-second`, `--event-burst`); a row of one flag, the first.
    func testLimitsTableGivesTheDeclaredDefaults() throws {
        let document = try Self.protocolDocument()
        let lines = document.components(separatedBy: "\n")
        let header = try XCTUnwrap(
            lines.firstIndex { Self.cells($0).map { $0.contains("default") && $0.contains("flag") } ?? false },
            "PROTOCOL.md has no limits table (a header with `default` and `flag` columns)")
        let columns = try XCTUnwrap(Self.cells(lines[header]))
        let defaultColumn = try XCTUnwrap(columns.firstIndex(of: "default"))
        let flagColumn = try XCTUnwrap(columns.firstIndex(of: "flag"))
        let limitColumn = 0
        var checked = 0
        for (offset, line) in lines[min(header + 2, lines.count)...].enumerated() {
            guard let row = Self.cells(line) else { break }
            let place = "PROTOCOL.md:\(header + 3 + offset)"
            guard row.count == columns.count else {
                XCTFail("\(place): \(row.count) cells, the header has \(columns.count)\n\(line)")
                continue
            }
            let flags = Self.flags(in: row[flagColumn]).map(\.name)
            let stated = Self.quantities(in: row[defaultColumn])
            for (index, flag) in flags.enumerated() {
                // A flag that is no setting is testEveryFlagTheDocumentNamesIsASettingOfRelayServe's failure.
                guard let setting = ConfigurationLoader.settings.first(where: { $0.name == flag }) else { continue }
                guard let declared = setting.defaultValue else {
                    XCTFail("\(place): the table gives --\(flag) a default (\(row[defaultColumn])), the declaration has none")
                    continue
                }
                checked += 1
                if declared.contains("=") {
                    // `KIND=PER_SECOND[:BURST],…` (`--rate`): the cell gives each kind's per-second
                    // budget, in the order the limit cell's parenthesis names the kinds.
                    let entries = declared.split(separator: ",").map { $0.split(separator: "=", maxSplits: 1) }
                    let kinds = entries.map { String($0[0]) }
                    let perSecond = entries.map { $0.count == 2 ? Double($0[1].split(separator: ":")[0]) : nil }
                    XCTAssertEqual(stated.map(\.value), perSecond.compactMap { $0 }, "\(place): the per-second budgets of --\(flag) (declared \(declared))")
                    let limit = row[limitColumn]
                    if let open = limit.firstIndex(of: "("), let close = limit[open...].firstIndex(of: ")") {
                        let named = limit[limit.index(after: open)..<close].split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }
                        XCTAssertEqual(named, kinds, "\(place): the kinds of --\(flag) (declared \(declared))")
                    }
                    continue
                }
                guard let value = Double(declared) else {
                    XCTFail("\(place): --\(flag)'s default \(declared) is not a number the table can state")
                    continue
                }
                guard index < stated.count else {
                    XCTFail("\(place): the table states \(stated.count) quantities for \(flags.count) flags, none for --\(flag)\n\(line)")
                    continue
                }
                let (documented, dimension) = stated[index]
                let expected: Double
                if dimension == .milliseconds {
                    guard let ms = Self.milliseconds(setting, value) else {
                        XCTFail("\(place): the table states a time for --\(flag), whose unit the declaration does not say (ms or seconds)")
                        continue
                    }
                    expected = ms
                } else {
                    expected = value
                }
                XCTAssertEqual(documented, expected, "\(place): the table's default of --\(flag) (\(row[defaultColumn])) is not the declared \(declared)")
            }
        }
        XCTAssertGreaterThan(checked, 10, "the limits table's defaults were read")
    }
}
