import Foundation

extension ConfigurationLoader {
    /// One setting, declared once (`ConfigurationLoader.settings`): its name, kind, default, help,
    /// validation and where its value lands in `RelayConfiguration`. The command-line flags,
    /// `relay serve --help`, the environment and config-file keys, README's table and
    /// `RelayConfiguration`'s defaults all come from that declaration.
    public struct Setting: Sendable {
        /// How the value is written: `bool` is an on/off flag (`--no-deflate` alone), `list` is
        /// comma-separated (a JSON array in the config file; its flag may be repeated).
        public enum Kind: Sendable { case string, int, double, bool, list }

        /// The flag `--NAME`, the environment variable `RELAY_NAME`, the config-file key `"NAME"`.
        public let name: String
        public let kind: Kind
        /// The default as it would be typed after the flag; nil: unset.
        public let defaultValue: String?
        /// What leaving it unset means, for the docs of a setting without a default ("dev mode").
        public let unset: String
        public let help: String
        /// Shown as `<redacted>`, never echoed in a problem.
        public let secret: Bool
        /// Checks a non-empty value and writes it into the configuration; returns its problems.
        let apply: @Sendable (String, inout RelayConfiguration) -> [String]

        typealias Write<Value> = @Sendable (inout RelayConfiguration, Value) -> Void
    }
}

extension ConfigurationLoader.Setting {
    /// An integer of at least `min` (and at most `max`).
    static func int(
        _ name: String, _ defaultValue: Int?, min: Int = 0, max: Int? = nil, unset: String = "—", _ help: String, _ write: @escaping Write<Int>
    ) -> Self {
        Self(name: name, kind: .int, defaultValue: defaultValue.map(String.init), unset: unset, help: help, secret: false) { text, c in
            guard let v = Int(text), v >= min, v <= max ?? .max else {
                let expected = max.map { "an integer from \(min) to \($0)" } ?? "an integer ≥ \(min)"
                return ["\(name): expected \(expected), got \(text)"]
            }
            write(&c, v)
            return []
        }
    }

    /// A positive number (of at least `atLeast`).
    static func number(_ name: String, _ defaultValue: Double, atLeast: Double? = nil, _ help: String, _ write: @escaping Write<Double>) -> Self {
        Self(name: name, kind: .double, defaultValue: format(defaultValue), unset: "—", help: help, secret: false) { text, c in
            guard let v = Double(text), v > 0 else { return ["\(name): expected a positive number, got \(text)"] }
            if let atLeast, v < atLeast { return ["\(name): expected a number ≥ \(format(atLeast)), got \(text)"] }
            write(&c, v)
            return []
        }
    }

    /// On or off; off unless given. As a flag it takes no value (`--no-deflate`).
    static func flag(_ name: String, _ help: String, _ write: @escaping Write<Bool>) -> Self {
        Self(name: name, kind: .bool, defaultValue: "false", unset: "off", help: help, secret: false) { text, c in
            switch text.lowercased() {
            case "true", "1", "yes", "on": write(&c, true)
            case "false", "0", "no", "off": write(&c, false)
            default: return ["\(name): expected true or false, got \(text)"]
            }
            return []
        }
    }

    /// Free text (a secret is at least `minLength` characters).
    static func text(
        _ name: String, default defaultValue: String? = nil, unset: String = "—", secret: Bool = false, minLength: Int = 0, _ help: String,
        _ write: @escaping Write<String> = { _, _ in }
    ) -> Self {
        checkedText(name, default: defaultValue, unset: unset, secret: secret, help) { c, v in
            // The length only, never the value: it may be a secret.
            guard v.utf8.count >= minLength else { return "\(name): must be at least \(minLength) characters (got \(v.utf8.count))" }
            write(&c, v)
            return nil
        }
    }

    /// Text that `write` checks as it writes it: it returns the problem, if any.
    static func checkedText(
        _ name: String, default defaultValue: String? = nil, unset: String = "—", secret: Bool = false, _ help: String,
        _ write: @escaping @Sendable (inout RelayConfiguration, String) -> String?
    ) -> Self {
        Self(name: name, kind: .string, defaultValue: defaultValue, unset: unset, help: help, secret: secret) { text, c in
            write(&c, text).map { [$0] } ?? []
        }
    }

    /// One of `choices`, which the help lists.
    static func choice(_ name: String, _ defaultValue: String, among choices: [String], _ help: String, _ write: @escaping Write<String> = { _, _ in }) -> Self {
        let listed = choices.map { "`\($0)`" }.joined(separator: ", ")
        return Self(name: name, kind: .string, defaultValue: defaultValue, unset: "—", help: "\(help); one of \(listed)", secret: false) { text, c in
            guard choices.contains(text) else { return ["\(name): expected one of \(choices.joined(separator: ", ")), got \(text)"] }
            write(&c, text)
            return []
        }
    }

    /// Comma-separated items (blank ones dropped); `write` returns the problems of bad items.
    static func list(
        _ name: String, default defaultValue: String? = nil, unset: String = "empty", _ help: String,
        _ write: @escaping @Sendable (inout RelayConfiguration, [String]) -> [String]
    ) -> Self {
        Self(name: name, kind: .list, defaultValue: defaultValue, unset: unset, help: help, secret: false) { text, c in
            write(&c, items(text))
        }
    }

    static func items(_ text: String) -> [String] {
        text.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
    }

    /// `250`, not `250.0`.
    static func format(_ value: Double) -> String {
        value.rounded() == value && abs(value) < 1e15 ? String(Int(value)) : String(value)
    }
}
