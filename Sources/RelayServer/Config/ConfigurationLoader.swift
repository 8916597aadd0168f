import Foundation
import RelayCore
import RelayRedis

/// Resolves Relay's settings from command-line flags, environment variables and a JSON config
/// file, in that order of precedence, then validates them into a `RelayConfiguration`.
///
/// Every setting has one name, used everywhere: the flag `--max-payload`, the environment
/// variable `RELAY_MAX_PAYLOAD`, the config-file key `"max-payload"`.
public enum ConfigurationLoader {
    public enum Kind: Sendable { case string, int, double, bool, list }

    public struct Key: Sendable {
        public var name: String
        public var kind: Kind
        public var secret: Bool
        public var defaultValue: String?
        public var help: String
    }

    /// Where a resolved value came from.
    public enum Source: String, Sendable { case flag, environment = "env", file, `default`, generated }

    public struct Resolved: Sendable {
        public var key: Key
        public var value: String?
        public var source: Source
        /// `value` with secrets replaced by `<redacted>`.
        public var display: String { value.map { key.secret ? "<redacted>" : $0 } ?? "<unset>" }
    }

    public struct ConfigError: Error, CustomStringConvertible, Sendable {
        public var problems: [String]
        public var description: String { problems.joined(separator: "\n") }
    }

    public static let keys: [Key] = [
        Key(name: "host", kind: .string, secret: false, defaultValue: "127.0.0.1", help: "address to listen on"),
        Key(name: "port", kind: .int, secret: false, defaultValue: "8080", help: "port to listen on (0: any free port)"),
        Key(name: "jwt-secret", kind: .string, secret: true, defaultValue: nil, help: "HS256 secret for client tokens (≥ 32 bytes); none and no public key = dev mode"),
        Key(name: "jwt-public-key", kind: .string, secret: false, defaultValue: nil, help: "PEM file with an ES256 public key"),
        Key(name: "jwt-leeway", kind: .int, secret: false, defaultValue: "30", help: "accepted clock skew on exp and nbf, seconds"),
        Key(name: "api-key", kind: .string, secret: true, defaultValue: nil, help: "bearer key of the backend API (≥ 16 chars)"),
        Key(name: "admin-key", kind: .string, secret: true, defaultValue: nil, help: "bearer key of the admin API (≥ 16 chars)"),
        Key(name: "db", kind: .string, secret: false, defaultValue: "relay.sqlite", help: "SQLite file for receipts"),
        Key(name: "receipts-retention-days", kind: .int, secret: false, defaultValue: "30", help: "delete older receipts (0 keeps them)"),
        Key(name: "threads", kind: .int, secret: false, defaultValue: nil, help: "event loop threads (default: cores)"),
        Key(name: "ping-interval", kind: .int, secret: false, defaultValue: "25000", help: "Engine.IO pingInterval, ms"),
        Key(name: "ping-timeout", kind: .int, secret: false, defaultValue: "20000", help: "Engine.IO pingTimeout, ms"),
        Key(name: "max-payload", kind: .int, secret: false, defaultValue: "1000000", help: "largest inbound message, bytes"),
        Key(name: "max-connect-payload", kind: .int, secret: false, defaultValue: "16384", help: "largest inbound message or frame before CONNECT succeeded, bytes"),
        Key(name: "connect-timeout", kind: .int, secret: false, defaultValue: "10000", help: "time to send CONNECT, ms"),
        Key(name: "handshake-timeout", kind: .int, secret: false, defaultValue: "10000", help: "time to finish an HTTP request, ms"),
        Key(name: "max-event-bytes", kind: .int, secret: false, defaultValue: "65536", help: "largest client event, bytes, as each recipient is charged (binary attachments as base64)"),
        Key(name: "packets-per-second", kind: .double, secret: false, defaultValue: "250", help: "Engine.IO packets per connection per second, any transport, pings included (burst 2×); past it: close 1008"),
        Key(name: "inbound-bytes-per-second", kind: .int, secret: false, defaultValue: "1048576", help: "bytes of Engine.IO packets and WebSocket control frames per connection per second (burst 4×, at least 2 × max-payload); past it: close 1008"),
        Key(name: "event-bytes-per-second", kind: .int, secret: false, defaultValue: "262144", help: "client event bytes per connection per second (burst 2×, at least max-event-bytes); past it: rate_limited"),
        Key(name: "events-per-second", kind: .double, secret: false, defaultValue: "50", help: "sustained events per second per connection"),
        Key(name: "event-burst", kind: .double, secret: false, defaultValue: "100", help: "event burst per connection"),
        Key(name: "rate", kind: .list, secret: false, defaultValue: nil, help: "per-kind budgets KIND=PER_SECOND[:BURST]"),
        Key(name: "error-replies-per-second", kind: .double, secret: false, defaultValue: "5", help: "error replies per connection per second (burst 4×, at least 20); past it: close 1008"),
        Key(name: "receipts-per-user-per-second", kind: .double, secret: false, defaultValue: "400", help: "receipts one user may write per second over all sockets (burst 2×)"),
        Key(name: "max-pending-receipts", kind: .int, secret: false, defaultValue: "256", help: "receipts of one connection awaiting commit"),
        Key(name: "max-rooms-per-connection", kind: .int, secret: false, defaultValue: "100", help: "rooms per connection"),
        Key(name: "max-members-per-room", kind: .int, secret: false, defaultValue: "10000", help: "members per room"),
        Key(name: "max-connections", kind: .int, secret: false, defaultValue: "100000", help: "connections in total"),
        Key(name: "max-connections-per-user", kind: .int, secret: false, defaultValue: "20", help: "connections per user"),
        Key(name: "max-connections-per-ip", kind: .int, secret: false, defaultValue: "1000", help: "connections per client IP"),
        Key(name: "proxy-protocol", kind: .bool, secret: false, defaultValue: "false", help: "every connection starts with a PROXY protocol header (v1 or v2) from a trusted proxy"),
        Key(name: "trusted-proxies", kind: .list, secret: false, defaultValue: nil, help: "IPs/CIDRs of load balancers whose PROXY header and X-Forwarded-For are believed"),
        Key(name: "allowed-origins", kind: .list, secret: false, defaultValue: nil, help: "Origins allowed to open sockets ('*': any; empty: none)"),
        Key(name: "disable-custom-events", kind: .bool, secret: false, defaultValue: "false", help: "refuse custom events"),
        Key(name: "typing-window-ms", kind: .int, secret: false, defaultValue: "100", help: "typing coalescing window"),
        Key(name: "typing-expiry-ms", kind: .int, secret: false, defaultValue: "5000", help: "typing expiry"),
        Key(name: "token-expiry-notice-ms", kind: .int, secret: false, defaultValue: "60000", help: "auth:expiring this long before a token's exp (0: never)"),
        Key(name: "revocation-ttl-s", kind: .int, secret: false, defaultValue: "604800", help: "how long a backend revocation is kept (≥ the longest token lifetime)"),
        Key(name: "history-size", kind: .int, secret: false, defaultValue: "200", help: "recoverable events kept per room and per user (0: no history)"),
        Key(name: "history-ttl-ms", kind: .int, secret: false, defaultValue: "120000", help: "how long recoverable events are kept"),
        Key(name: "history-max-bytes", kind: .int, secret: false, defaultValue: "268435456", help: "memory history of all streams, bytes"),
        Key(name: "history-stream-bytes", kind: .int, secret: false, defaultValue: "2097152", help: "memory history of one room or user, bytes (the newest event always stays)"),
        Key(name: "recovery-window-ms", kind: .int, secret: false, defaultValue: "120000", help: "how long a dropped session can be recovered"),
        Key(name: "recovery-takeover-after-ms", kind: .int, secret: false, defaultValue: "1000", help: "a reconnect with the pid of a connection at least this old takes it over"),
        Key(name: "recovery-offsets", kind: .string, secret: false, defaultValue: "opt-in", help: "opt-in or always: which sockets get offsets and a pid"),
        Key(name: "tls-cert", kind: .string, secret: false, defaultValue: nil, help: "PEM certificate chain (with tls-key: TLS)"),
        Key(name: "tls-key", kind: .string, secret: false, defaultValue: nil, help: "PEM private key"),
        Key(name: "no-deflate", kind: .bool, secret: false, defaultValue: "false", help: "do not negotiate permessage-deflate"),
        Key(name: "deflate-threshold", kind: .int, secret: false, defaultValue: "1024", help: "smallest message compressed, bytes"),
        Key(name: "echo-path", kind: .string, secret: false, defaultValue: nil, help: "WebSocket echo endpoint path (conformance tests)"),
        Key(name: "drain-rate", kind: .int, secret: false, defaultValue: "2000", help: "sockets told to go per second on shutdown"),
        Key(name: "shutdown-timeout", kind: .int, secret: false, defaultValue: "30000", help: "upper bound of a graceful shutdown, ms"),
        Key(name: "redis", kind: .string, secret: true, defaultValue: nil, help: "redis://host:port to join a cluster of nodes"),
        Key(name: "node-id", kind: .string, secret: false, defaultValue: nil, help: "this node's id in the cluster (default: random)"),
        Key(name: "cluster-heartbeat-ms", kind: .int, secret: false, defaultValue: "2000", help: "cluster heartbeat; a node silent for 3 heartbeats leaves presence"),
        Key(name: "webhook-url", kind: .list, secret: false, defaultValue: nil, help: "http(s) URLs that receive signed webhooks (repeatable / comma-separated)"),
        Key(name: "webhook-secret", kind: .string, secret: true, defaultValue: nil, help: "HMAC-SHA256 key of the webhook signature (≥ 32 chars; required with webhook-url)"),
        Key(name: "webhook-events", kind: .list, secret: false, defaultValue: nil, help: "client events also sent as webhooks, e.g. message:read,chat:seen"),
        Key(name: "webhook-batch-size", kind: .int, secret: false, defaultValue: "100", help: "webhook events per request"),
        Key(name: "webhook-flush-ms", kind: .int, secret: false, defaultValue: "200", help: "longest wait for a webhook batch to fill, ms"),
        Key(name: "heap-trim-interval-ms", kind: .int, secret: false, defaultValue: "10000", help: "how often freed heap memory may be given back after connection churn (256 sessions ended or connections closed), ms; 0: never"),
        Key(name: "heap-trim-after", kind: .int, secret: false, defaultValue: "256", help: "sessions ended or connections closed since the last heap trim that make the next one due"),
        Key(name: "webhook-queue-size", kind: .int, secret: false, defaultValue: "10000", help: "webhook events waiting per URL; beyond: dropped"),
        Key(name: "webhook-queue-bytes", kind: .int, secret: false, defaultValue: "67108864", help: "bytes of webhook events waiting per URL; beyond: dropped"),
        Key(name: "webhook-max-attempts", kind: .int, secret: false, defaultValue: "12", help: "attempts per webhook batch (0: retry without end)"),
        Key(name: "webhook-max-backoff-ms", kind: .int, secret: false, defaultValue: "30000", help: "largest webhook retry backoff, ms (first: 250, doubling, jittered)"),
        Key(name: "webhook-timeout-ms", kind: .int, secret: false, defaultValue: "10000", help: "time limit of one webhook request, ms"),
        Key(name: "metrics-key", kind: .string, secret: true, defaultValue: nil, help: "bearer key required by GET /metrics (≥ 16 chars; unset: open)"),
        Key(name: "log-level", kind: .string, secret: false, defaultValue: "info", help: "trace, debug, info, notice, warning, error, critical"),
        Key(name: "log-format", kind: .string, secret: false, defaultValue: "text", help: "text or json"),
    ]

    static let byName = Dictionary(uniqueKeysWithValues: keys.map { ($0.name, $0) })

    /// The environment variable of a key: `RELAY_` + upper snake case.
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
            guard let key = byName[k] else {
                problems.append("\(path): unknown setting \"\(k)\"")
                continue
            }
            switch v {
            case .string(let s): out[k] = s
            case .int(let i): out[k] = String(i)
            case .double(let d): out[k] = String(d)
            case .bool(let b): out[k] = b ? "true" : "false"
            case .array(let items) where key.kind == .list:
                out[k] = items.compactMap { $0.stringValue }.joined(separator: ",")
            case .null: break
            default: problems.append("\(path): \"\(k)\" has the wrong type")
            }
        }
        if !problems.isEmpty { throw ConfigError(problems: problems) }
        return out
    }

    /// Resolves every key: flag, then environment, then file, then default.
    public static func resolve(flags: [String: String], environment: [String: String], file: [String: String]) -> [String: Resolved] {
        var out: [String: Resolved] = [:]
        for key in keys {
            if let v = flags[key.name] {
                out[key.name] = Resolved(key: key, value: v, source: .flag)
            } else if let v = environment[environmentName(key.name)] {
                out[key.name] = Resolved(key: key, value: v, source: .environment)
            } else if let v = file[key.name] {
                out[key.name] = Resolved(key: key, value: v, source: .file)
            } else {
                out[key.name] = Resolved(key: key, value: key.defaultValue, source: .default)
            }
        }
        return out
    }

    /// Turns resolved settings into a configuration, collecting every problem at once.
    /// Missing secrets in dev mode are generated (and marked so).
    public static func build(_ settings: inout [String: Resolved]) throws(ConfigError) -> (RelayConfiguration, devMode: Bool) {
        var problems: [String] = []
        func string(_ k: String) -> String? { settings[k]?.value.flatMap { $0.isEmpty ? nil : $0 } }
        func int(_ k: String, min: Int = 0) -> Int? {
            guard let s = string(k) else { return nil }
            guard let v = Int(s), v >= min else { problems.append("\(k): expected an integer ≥ \(min), got \(s)"); return nil }
            return v
        }
        func double(_ k: String) -> Double? {
            guard let s = string(k) else { return nil }
            guard let v = Double(s), v > 0 else { problems.append("\(k): expected a positive number, got \(s)"); return nil }
            return v
        }
        func bool(_ k: String) -> Bool {
            guard let s = string(k)?.lowercased() else { return false }
            switch s {
            case "true", "1", "yes", "on": return true
            case "false", "0", "no", "off": return false
            default: problems.append("\(k): expected true or false, got \(s)"); return false
            }
        }
        func list(_ k: String) -> [String] {
            (string(k) ?? "").split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
        }

        let devMode = string("jwt-secret") == nil && string("jwt-public-key") == nil
        var jwt = RelayConfiguration.JWTAlgorithm.hs256(secret: "")
        if let path = string("jwt-public-key") {
            if string("jwt-secret") != nil { problems.append("jwt-secret and jwt-public-key are exclusive") }
            if let pem = try? String(contentsOfFile: path, encoding: .utf8) { jwt = .es256(publicKeyPEM: pem) } else { problems.append("jwt-public-key: cannot read \(path)") }
        } else {
            let secret = string("jwt-secret") ?? TokenIssuer.randomSecret()
            if devMode { settings["jwt-secret"]?.value = secret; settings["jwt-secret"]?.source = .generated }
            if secret.utf8.count < 32 { problems.append("jwt-secret: must be at least 32 bytes (got \(secret.utf8.count))") }
            jwt = .hs256(secret: secret)
        }
        for k in ["api-key", "admin-key"] {
            if string(k) == nil {
                if devMode {
                    settings[k]?.value = TokenIssuer.randomSecret(bytes: 16)
                    settings[k]?.source = .generated
                } else {
                    problems.append("\(k): required outside dev mode (flag --\(k) or \(environmentName(k)))")
                }
            } else if string(k)!.utf8.count < 16 {
                problems.append("\(k): must be at least 16 characters")
            }
        }
        var c = RelayConfiguration(jwt: jwt, apiKey: string("api-key") ?? "", adminKey: string("admin-key") ?? "")
        c.host = string("host") ?? "127.0.0.1"
        if let v = int("jwt-leeway") { c.jwtLeewaySeconds = Int64(min(v, 3600)) }
        if let v = int("port") { if v > 65535 { problems.append("port: at most 65535") } else { c.port = v } }
        c.databasePath = string("db") ?? "relay.sqlite"
        if let v = int("receipts-retention-days") { c.receiptsRetentionDays = v > 0 ? v : nil }
        if let v = int("threads", min: 1) { c.eventLoopThreads = v }
        if let v = int("ping-interval", min: 1) { c.pingIntervalMs = v }
        if let v = int("ping-timeout", min: 1) { c.pingTimeoutMs = v }
        if let v = int("max-payload", min: 16) { c.maxPayload = v }
        if let v = int("max-connect-payload", min: 1024) { c.maxConnectPayload = v }
        if let v = int("connect-timeout", min: 1) { c.connectTimeoutMs = v }
        if let v = int("handshake-timeout", min: 1) { c.handshakeTimeoutMs = v }
        if let v = int("max-event-bytes", min: 16) { c.maxEventBytes = v }
        if let v = double("packets-per-second") {
            if v >= 1 { c.inbound.packets = .init(perSecond: v, burst: v * 2) } else { problems.append("packets-per-second: at least 1") }
        }
        if let v = int("inbound-bytes-per-second", min: 1024) { c.inbound.bytes = .init(perSecond: Double(v), burst: Double(v) * 4) }
        if let v = int("event-bytes-per-second", min: 1) { c.inbound.eventBytes = .init(perSecond: Double(v), burst: Double(v) * 2) }
        c.applyEventByteBounds()
        let perSecond = double("events-per-second") ?? c.eventsPerSecond.perSecond
        c.eventsPerSecond = .init(perSecond: perSecond, burst: double("event-burst") ?? c.eventsPerSecond.burst)
        for spec in list("rate") {
            let parts = spec.split(separator: "=", maxSplits: 1)
            let numbers = parts.count == 2 ? parts[1].split(separator: ":").compactMap { Double($0) } : []
            guard parts.count == 2, let kind = RateClass(rawValue: String(parts[0])), (1...2).contains(numbers.count), numbers.allSatisfy({ $0 > 0 }) else {
                problems.append("rate: expected KIND=PER_SECOND[:BURST] with KIND one of \(RateClass.allCases.map(\.rawValue).joined(separator: ", ")); got \(spec)")
                continue
            }
            c.eventsPerSecondByClass[kind] = .init(perSecond: numbers[0], burst: numbers.count == 2 ? numbers[1] : numbers[0] * 2)
        }
        if let v = double("error-replies-per-second") { c.errorReplies = .init(perSecond: v, burst: max(20, v * 4)) }
        if let v = double("receipts-per-user-per-second") { c.receiptsPerUser = .init(perSecond: v, burst: v * 2) }
        if let v = int("max-pending-receipts", min: 1) { c.maxPendingReceiptsPerConnection = v }
        if let v = int("max-rooms-per-connection", min: 1) { c.maxRoomsPerConnection = v }
        if let v = int("max-members-per-room", min: 1) { c.maxMembersPerRoom = v }
        if let v = int("max-connections", min: 1) { c.maxConnections = v }
        if let v = int("max-connections-per-user", min: 1) { c.maxConnectionsPerUser = v }
        if let v = int("max-connections-per-ip", min: 1) { c.maxConnectionsPerIP = v }
        c.allowedOrigins = list("allowed-origins")
        var trusted: [IPAddressRange] = []
        for entry in list("trusted-proxies") {
            do throws(IPAddressRange.ParseError) {
                trusted.append(try IPAddressRange(parsing: entry))
            } catch {
                problems.append("trusted-proxies: \(error)")
            }
        }
        c.trustedProxies = TrustedProxies(trusted)
        c.proxyProtocol = bool("proxy-protocol")
        if c.proxyProtocol, list("trusted-proxies").isEmpty {
            problems.append("proxy-protocol: needs trusted-proxies (the load balancers' addresses); without it every connection would be refused")
        }
        c.customEventsEnabled = !bool("disable-custom-events")
        if let v = int("typing-window-ms", min: 1) { c.typingWindowMs = Int64(v) }
        if let v = int("typing-expiry-ms", min: 1) { c.typingExpiryMs = Int64(v) }
        if let v = int("token-expiry-notice-ms") { c.tokenExpiryNoticeMs = Int64(v) }
        if let v = int("revocation-ttl-s", min: 60) { c.revocationTTLSeconds = Int64(v) }
        if let v = int("history-size") { c.historyLimits.maxEvents = v }
        if let v = int("history-ttl-ms") { c.historyLimits.maxAgeMs = Int64(v) }
        if let v = int("history-max-bytes") { c.historyLimits.maxBytes = v }
        if let v = int("history-stream-bytes", min: 1) { c.historyLimits.maxStreamBytes = v }
        if let v = int("recovery-window-ms") { c.recoveryWindowMs = Int64(v) }
        if let v = int("recovery-takeover-after-ms") { c.recoveryTakeoverAfterMs = Int64(v) }
        if c.recoveryWindowMs > c.historyLimits.maxAgeMs {
            problems.append("recovery-window-ms: at most history-ttl-ms (\(c.historyLimits.maxAgeMs)); a longer window could not be recovered")
        }
        switch string("recovery-offsets") {
        case nil, "opt-in"?: c.offsetsForEverySocket = false
        case "always"?: c.offsetsForEverySocket = true
        case let other?: problems.append("recovery-offsets: opt-in or always, got \(other)")
        }
        c.tlsCertificatePath = string("tls-cert")
        c.tlsKeyPath = string("tls-key")
        if (c.tlsCertificatePath == nil) != (c.tlsKeyPath == nil) { problems.append("tls-cert and tls-key go together") }
        for path in [c.tlsCertificatePath, c.tlsKeyPath].compactMap({ $0 }) where !FileManager.default.isReadableFile(atPath: path) {
            problems.append("cannot read \(path)")
        }
        c.deflateEnabled = !bool("no-deflate")
        if let v = int("deflate-threshold") { c.deflateThresholdBytes = v }
        if let p = string("echo-path") {
            if p.hasPrefix("/"), !p.hasPrefix("/socket.io"), !p.hasPrefix("/api/"), !p.hasPrefix("/admin/") { c.echoPath = p } else { problems.append("echo-path: a path like /echo outside /socket.io, /api and /admin") }
        }
        if let v = int("heap-trim-interval-ms") { c.heapTrimIntervalMs = max(0, v) }
        if let v = int("heap-trim-after", min: 1) { c.heapTrimAfterSessions = v }
        if let v = int("drain-rate", min: 1) { c.drainRatePerSecond = v }
        if let v = int("shutdown-timeout") { c.shutdownTimeoutMs = v }
        if let r = string("redis") {
            if RedisEndpoint(url: r) == nil { problems.append("redis: expected redis://host:port[/db], got \(r)") } else { c.redisURL = r }
        }
        c.nodeID = string("node-id")
        if let v = int("cluster-heartbeat-ms", min: 50) { c.clusterHeartbeatMs = Int64(v) }
        var webhooks = WebhookSettings()
        webhooks.urls = list("webhook-url")
        webhooks.secret = string("webhook-secret") ?? ""
        webhooks.clientEvents = Set(list("webhook-events"))
        if let v = int("webhook-batch-size", min: 1) { webhooks.batchSize = v }
        if let v = int("webhook-flush-ms") { webhooks.flushMs = Int64(v) }
        if let v = int("webhook-queue-size", min: 1) { webhooks.queueSize = v }
        if let v = int("webhook-queue-bytes", min: 1024) { webhooks.queueBytes = v }
        if let v = int("webhook-max-attempts") { webhooks.maxAttempts = v }
        if let v = int("webhook-max-backoff-ms", min: 1) { webhooks.maxBackoffMs = Int64(v) }
        if let v = int("webhook-timeout-ms", min: 1) { webhooks.timeoutMs = Int64(v) }
        problems += webhooks.problems()
        c.webhooks = webhooks
        if let key = string("metrics-key") {
            if key.utf8.count < 16 { problems.append("metrics-key: must be at least 16 characters") } else { c.metricsKey = key }
        }
        if let level = string("log-level"), !["trace", "debug", "info", "notice", "warning", "error", "critical"].contains(level) {
            problems.append("log-level: \(level) is not a level")
        }
        if let format = string("log-format"), !["text", "json"].contains(format) { problems.append("log-format: text or json") }
        if !problems.isEmpty { throw ConfigError(problems: problems) }
        return (c, devMode)
    }

    /// The resolved settings, one per line, secrets redacted.
    public static func describe(_ settings: [String: Resolved]) -> String {
        keys.compactMap { key in
            guard let r = settings[key.name], r.value != nil || r.source != .default else { return nil }
            return "  \(key.name) = \(r.display)  (\(r.source.rawValue))"
        }.joined(separator: "\n")
    }
}
