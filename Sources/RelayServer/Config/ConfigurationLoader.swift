import Foundation
import RelayCore

/// Resolves Relay's settings from command-line flags, environment variables and a JSON config
/// file, in that order of precedence, then validates them into a `RelayConfiguration`.
///
/// Every setting is declared once (`settings`, Settings.swift) and has one name, used
/// everywhere: the flag `--max-payload`, the environment variable `RELAY_MAX_PAYLOAD`, the
/// config-file key `"max-payload"`.
public enum ConfigurationLoader {
    /// Where a resolved value came from.
    public enum Source: String, Sendable { case flag, environment = "env", file, `default`, generated }

    public struct Resolved: Sendable {
        public var setting: Setting
        public var value: String?
        public var source: Source
        /// `value` with secrets replaced by `<redacted>`.
        public var display: String { value.map { setting.secret ? "<redacted>" : $0 } ?? "<unset>" }
    }

    public struct ConfigError: Error, CustomStringConvertible, Sendable {
        public var problems: [String]
        public var description: String { problems.joined(separator: "\n") }
    }

    /// The environment variable of a setting: `RELAY_` + upper snake case.
    public static func environmentName(_ key: String) -> String {
        "RELAY_" + key.uppercased().replacingOccurrences(of: "-", with: "_")
    }

    /// Reads a JSON config file: an object whose keys are setting names.
    public static func readFile(_ path: String) throws(ConfigError) -> [String: String] {
        guard let data = FileManager.default.contents(atPath: path) else { throw ConfigError(problems: ["cannot read config file \(path)"]) }
        let json: JSONValue
        do { json = try JSONParser.parse(Array(data)) } catch { throw ConfigError(problems: ["\(path): not valid JSON (\(error))"]) }
        guard case .object(let pairs) = json else { throw ConfigError(problems: ["\(path): the config file must be a JSON object"]) }
        var out: [String: String] = [:]
        var problems: [String] = []
        for (k, v) in pairs {
            guard let setting = byName[k] else {
                problems.append("\(path): unknown setting \"\(k)\"")
                continue
            }
            switch v {
            case .string(let s): out[k] = s
            case .int(let i): out[k] = String(i)
            case .double(let d): out[k] = String(d)
            case .bool(let b): out[k] = b ? "true" : "false"
            case .array(let items) where setting.kind == .list:
                out[k] = items.compactMap { $0.stringValue }.joined(separator: ",")
            case .null: break
            default: problems.append("\(path): \"\(k)\" has the wrong type")
            }
        }
        if !problems.isEmpty { throw ConfigError(problems: problems) }
        return out
    }

    /// Reads the settings given on the command line: `--NAME VALUE`, `--NAME=VALUE`, and an on/off
    /// setting as `--NAME` alone. A list given more than once collects every value (`--rate a
    /// --rate b`); any other setting keeps its last. Unknown names are problems.
    public static func parseArguments(_ arguments: [String]) throws(ConfigError) -> [String: String] {
        var values: [String: String] = [:]
        var problems: [String] = []
        var rest = arguments[...]
        // The next argument is the value, unless it is the next flag.
        func nextValue() -> String? { rest.first?.hasPrefix("--") == false ? rest.popFirst() : nil }
        while let argument = rest.popFirst() {
            guard argument.hasPrefix("--"), argument.count > 2 else {
                problems.append("unexpected argument \(argument): settings are given as --NAME VALUE")
                continue
            }
            let body = argument.dropFirst(2)
            let name = String(body.prefix { $0 != "=" })
            let inline = body.firstIndex(of: "=").map { String(body[body.index(after: $0)...]) }
            guard let setting = byName[name] else {
                problems.append("unknown setting --\(name) (relay serve --help lists them)")
                // Its value, if any, is not a second mistake.
                if inline == nil { _ = nextValue() }
                continue
            }
            guard let value = inline ?? (setting.kind == .bool ? "true" : nextValue()) else {
                problems.append("--\(name): missing value")
                continue
            }
            if setting.kind == .list, let earlier = values[name] { values[name] = earlier + "," + value } else { values[name] = value }
        }
        if !problems.isEmpty { throw ConfigError(problems: problems) }
        return values
    }

    /// Resolves every setting: flag, then environment, then file, then default.
    public static func resolve(flags: [String: String], environment: [String: String], file: [String: String]) -> [String: Resolved] {
        var out: [String: Resolved] = [:]
        for setting in settings {
            if let v = flags[setting.name] {
                out[setting.name] = Resolved(setting: setting, value: v, source: .flag)
            } else if let v = environment[environmentName(setting.name)] {
                out[setting.name] = Resolved(setting: setting, value: v, source: .environment)
            } else if let v = file[setting.name] {
                out[setting.name] = Resolved(setting: setting, value: v, source: .file)
            } else {
                out[setting.name] = Resolved(setting: setting, value: setting.defaultValue, source: .default)
            }
        }
        return out
    }

    /// Turns resolved settings into a configuration, collecting every problem at once: each
    /// setting checks and writes its own value, then `applyRules` checks them together.
    /// Missing secrets in dev mode are generated (and marked so).
    public static func build(_ resolved: inout [String: Resolved]) throws(ConfigError) -> (RelayConfiguration, devMode: Bool) {
        // Starts from the declared defaults (`RelayConfiguration.init`); `applyRules` sets the JWT key.
        var c = RelayConfiguration(jwt: .hs256(secret: ""), apiKey: "", adminKey: "")
        var problems: [String] = []
        for setting in settings {
            // Empty means unset, as if not given.
            guard let r = resolved[setting.name], r.source != .default, let value = r.value, !value.isEmpty else { continue }
            problems += setting.apply(value, &c)
        }
        let devMode = applyRules(&c, &resolved, &problems)
        if !problems.isEmpty { throw ConfigError(problems: problems) }
        return (c, devMode)
    }

    /// The rules between settings, after each one is in place. Dev mode (neither jwt-secret nor
    /// jwt-public-key) generates the missing secrets; returns whether it is on.
    static func applyRules(_ c: inout RelayConfiguration, _ resolved: inout [String: Resolved], _ problems: inout [String]) -> Bool {
        func given(_ name: String) -> String? { resolved[name]?.value.flatMap { $0.isEmpty ? nil : $0 } }
        func generated(_ name: String, _ value: String) -> String {
            resolved[name]?.value = value
            resolved[name]?.source = .generated
            return value
        }
        let devMode = given("jwt-secret") == nil && given("jwt-public-key") == nil
        if given("jwt-public-key") != nil {
            if given("jwt-secret") != nil { problems.append("jwt-secret and jwt-public-key are exclusive") }
        } else {
            let secret = given("jwt-secret") ?? generated("jwt-secret", TokenIssuer.randomSecret())
            // jwt-kit refuses a shorter HMAC key only when it first signs or verifies: refuse it here.
            if secret.utf8.count < 32 { problems.append("jwt-secret: must be at least 32 bytes (got \(secret.utf8.count))") }
            c.auth.jwt = .hs256(secret: secret)
        }
        for (name, key) in [("api-key", \RelayConfiguration.auth.apiKey), ("admin-key", \RelayConfiguration.auth.adminKey)] where given(name) == nil {
            if devMode {
                c[keyPath: key] = generated(name, TokenIssuer.randomSecret(bytes: 16))
            } else {
                problems.append("\(name): required outside dev mode (flag --\(name) or \(environmentName(name)))")
            }
        }
        if c.listener.proxyProtocol, Setting.items(given("trusted-proxies") ?? "").isEmpty {
            problems.append("proxy-protocol: needs trusted-proxies (the load balancers' addresses); without it every connection would be refused")
        }
        if c.recovery.windowMs > c.recovery.historyLimits.maxAgeMs {
            problems.append("recovery-window-ms: at most history-ttl-ms (\(c.recovery.historyLimits.maxAgeMs)); a longer window could not be recovered")
        }
        if (given("tls-cert") == nil) != (given("tls-key") == nil) { problems.append("tls-cert and tls-key go together") }
        problems += c.webhooks.problems()
        c.applyEventByteBounds()
        return devMode
    }

    /// The resolved settings, one per line, secrets redacted.
    public static func describe(_ resolved: [String: Resolved]) -> String {
        settings.compactMap { setting in
            guard let r = resolved[setting.name], r.value != nil || r.source != .default else { return nil }
            return "  \(setting.name) = \(r.display)  (\(r.source.rawValue))"
        }.joined(separator: "\n")
    }
}
