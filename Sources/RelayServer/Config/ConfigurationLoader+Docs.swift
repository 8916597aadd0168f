import Foundation

extension ConfigurationLoader {
    /// README's settings table, from the declarations (`relay settings --markdown`). A test fails
    /// when README.md holds anything else.
    public static func markdownTable() -> String {
        var lines = ["| setting | default | meaning |", "| --- | --- | --- |"]
        for setting in settings {
            let help = setting.help.replacingOccurrences(of: "|", with: "\\|")
            lines.append("| `\(setting.name)` | \(shownDefault(setting, code: true)) | \(help) |")
        }
        return lines.joined(separator: "\n") + "\n"
    }

    /// Every setting for `relay serve --help`: flag, default, help, wrapped to `width` columns.
    public static func helpText(width: Int = 78) -> String {
        var lines = [
            "SETTINGS:",
            "Each is a flag (--NAME VALUE or --NAME=VALUE; an on/off setting as --NAME alone), an environment variable (RELAY_ + NAME in upper snake case, e.g. RELAY_MAX_PAYLOAD) or a key of the JSON config file (--config), in that order of precedence. A list is comma-separated, and its flag may be repeated. Secrets are printed as <redacted>.",
            "",
        ].flatMap { wrap($0, width: width, indent: 0) }
        for setting in settings {
            let value: String
            switch setting.kind {
            case .bool: value = ""
            case .int: value = " <integer>"
            case .double: value = " <number>"
            case .string: value = " <text>"
            case .list: value = " <item,...>"
            }
            var shown = shownDefault(setting, code: false)
            // A list's items are trimmed: spaced after the commas, a long default can be wrapped.
            if setting.kind == .list { shown = shown.replacingOccurrences(of: ",", with: ", ") }
            let header = wrap("--\(setting.name)\(value) (default: \(shown))", width: width, indent: 6)
            lines += header.enumerated().map { $0.offset == 0 ? "  " + $0.element.dropFirst(6) : $0.element }
            lines += wrap(setting.help.replacingOccurrences(of: "`", with: ""), width: width, indent: 6)
        }
        return lines.joined(separator: "\n") + "\n"
    }

    /// The default as written, or what leaving the setting unset means.
    static func shownDefault(_ setting: Setting, code: Bool) -> String {
        guard let value = setting.defaultValue else { return setting.unset }
        if setting.kind == .bool, value == "false" { return setting.unset }
        return code ? "`\(value)`" : value
    }

    /// Greedy word wrap. 78 columns: ArgumentParser re-wraps a help line of 80 or more.
    static func wrap(_ text: String, width: Int, indent: Int) -> [String] {
        let pad = String(repeating: " ", count: indent)
        var lines: [String] = []
        var line = ""
        for word in text.split(separator: " ") {
            if !line.isEmpty, pad.count + line.count + 1 + word.count > width {
                lines.append(pad + line)
                line = ""
            }
            line += line.isEmpty ? String(word) : " " + word
        }
        if !line.isEmpty || lines.isEmpty { lines.append(line.isEmpty ? "" : pad + line) }
        return lines
    }
}
