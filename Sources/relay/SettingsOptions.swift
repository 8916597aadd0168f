import ArgumentParser
import Foundation
import RelayServer

/// The flags of `relay serve`. All optional: an absent flag falls back to the environment,
/// then the config file, then the default (see `ConfigurationLoader`).
struct SettingsOptions: ParsableArguments {
    @Option(help: "JSON config file (keys are the flag names); env RELAY_CONFIG.") var config: String?

    @Option(help: "Address to listen on (default 127.0.0.1).") var host: String?
    @Option(help: "Port to listen on; 0 picks a free one (default 8080).") var port: Int?
    @Option(name: .customLong("jwt-secret"), help: "HS256 secret for client tokens (≥ 32 bytes). None (and no public key): dev mode.") var jwtSecret: String?
    @Option(name: .customLong("jwt-public-key"), help: "PEM file with an ES256 public key; tokens must then be ES256.") var jwtPublicKey: String?
    @Option(name: .customLong("jwt-leeway"), help: "Accepted clock skew on exp and nbf, seconds (default 30, at most 3600).") var jwtLeeway: Int?
    @Option(name: .customLong("api-key"), help: "Bearer key of the backend API (≥ 16 chars).") var apiKey: String?
    @Option(name: .customLong("admin-key"), help: "Bearer key of the admin API (≥ 16 chars).") var adminKey: String?
    @Option(help: "SQLite file for delivery receipts (default relay.sqlite).") var db: String?
    @Option(name: .customLong("receipts-retention-days"), help: "Delete receipts older than this many days; 0 keeps them (default 30).") var receiptsRetentionDays: Int?
    @Option(help: "Event loop threads (default: cores).") var threads: Int?
    @Option(name: .customLong("ping-interval"), help: "Engine.IO pingInterval, ms (default 25000).") var pingInterval: Int?
    @Option(name: .customLong("ping-timeout"), help: "Engine.IO pingTimeout, ms (default 20000).") var pingTimeout: Int?
    @Option(name: .customLong("max-payload"), help: "Largest inbound message, bytes; larger: close 1009 (default 1000000).") var maxPayload: Int?
    @Option(name: .customLong("max-connect-payload"), help: "Largest inbound message or frame before CONNECT succeeded, bytes; larger: close 1009 (default 16384).") var maxConnectPayload: Int?
    @Option(name: .customLong("connect-timeout"), help: "Time to send CONNECT after the socket opens, ms (default 10000).") var connectTimeout: Int?
    @Option(name: .customLong("handshake-timeout"), help: "Time to finish an HTTP request or upgrade, ms (default 10000).") var handshakeTimeout: Int?
    @Option(name: .customLong("max-event-bytes"), help: "Largest client event, bytes, as each recipient is charged: binary attachments as base64 (default 65536).") var maxEventBytes: Int?
    @Option(name: .customLong("packets-per-second"), help: "Engine.IO packets per connection per second on any transport, pings included, burst 2×; past it: close 1008 (default 250).") var packetsPerSecond: Double?
    @Option(name: .customLong("inbound-bytes-per-second"), help: "Bytes of Engine.IO packets and WebSocket control frames per connection per second, burst 4× (at least 2 × max-payload); past it: close 1008 (default 1048576).") var inboundBytesPerSecond: Int?
    @Option(name: .customLong("event-bytes-per-second"), help: "Client event bytes per connection per second, burst 2× (at least max-event-bytes); past it: rate_limited (default 262144).") var eventBytesPerSecond: Int?
    @Option(name: .customLong("events-per-second"), help: "Sustained events per second per connection (default 50).") var eventsPerSecond: Double?
    @Option(name: .customLong("event-burst"), help: "Event burst per connection (default 100).") var eventBurst: Double?
    @Option(name: .customLong("rate"), help: "Per-kind budget KIND=PER_SECOND[:BURST]; kinds: control, typing, reaction, location, receipt, custom. Repeatable.") var rates: [String] = []
    @Option(name: .customLong("error-replies-per-second"), help: "Error replies per connection per second, burst 4× (at least 20); past it: close 1008 (default 5).") var errorRepliesPerSecond: Double?
    @Option(name: .customLong("receipts-per-user-per-second"), help: "Receipts one user may write per second over all sockets, burst 2× (default 400).") var receiptsPerUserPerSecond: Double?
    @Option(name: .customLong("max-pending-receipts"), help: "Receipts of one connection awaiting commit (default 256).") var maxPendingReceipts: Int?
    @Option(name: .customLong("max-rooms-per-connection"), help: "Default 100.") var maxRoomsPerConnection: Int?
    @Option(name: .customLong("max-members-per-room"), help: "Default 10000.") var maxMembersPerRoom: Int?
    @Option(name: .customLong("max-connections"), help: "Default 100000.") var maxConnections: Int?
    @Option(name: .customLong("max-connections-per-user"), help: "Default 20.") var maxConnectionsPerUser: Int?
    @Option(name: .customLong("max-connections-per-ip"), help: "Default 1000.") var maxConnectionsPerIP: Int?
    @Flag(name: .customLong("proxy-protocol"), help: "Every connection starts with a PROXY protocol header (v1 or v2) from a trusted proxy; others are closed.") var proxyProtocol = false
    @Option(name: .customLong("trusted-proxies"), help: "Comma-separated IPs/CIDRs of load balancers whose PROXY header and X-Forwarded-For are believed (default: none).") var trustedProxies: String?
    @Option(name: .customLong("allowed-origins"), help: "Comma-separated Origins allowed to open sockets ('*': any). Empty: only clients that send no Origin.") var allowedOrigins: String?
    @Flag(name: .customLong("disable-custom-events"), help: "Refuse custom entity:action events.") var disableCustomEvents = false
    @Option(name: .customLong("typing-window-ms"), help: "Typing coalescing window, ms (default 100).") var typingWindowMs: Int?
    @Option(name: .customLong("typing-expiry-ms"), help: "A typing:start not refreshed for this long expires, ms (default 5000).") var typingExpiryMs: Int?
    @Option(name: .customLong("token-expiry-notice-ms"), help: "Tell a socket auth:expiring this long before its token's exp, ms (default 60000; 0: never).") var tokenExpiryNoticeMs: Int?
    @Option(name: .customLong("revocation-ttl-s"), help: "How long a backend revocation is kept, s (default 604800; at least the longest token lifetime).") var revocationTTLs: Int?
    @Option(name: .customLong("history-size"), help: "Recoverable events kept per room and per user (default 200; 0: no history, no recovery).") var historySize: Int?
    @Option(name: .customLong("history-ttl-ms"), help: "How long recoverable events are kept, ms (default 120000).") var historyTTLMs: Int?
    @Option(name: .customLong("history-max-bytes"), help: "Memory history of all streams together, bytes (default 268435456).") var historyMaxBytes: Int?
    @Option(name: .customLong("history-stream-bytes"), help: "Memory history of one room or user, bytes; the newest event always stays (default 2097152).") var historyStreamBytes: Int?
    @Option(name: .customLong("recovery-window-ms"), help: "How long a dropped session can be recovered, ms (default 120000, at most the history TTL).") var recoveryWindowMs: Int?
    @Option(name: .customLong("recovery-takeover-after-ms"), help: "A reconnect with the pid of a live connection at least this old takes it over, ms (default 1000).") var recoveryTakeoverAfterMs: Int?
    @Option(name: .customLong("recovery-offsets"), help: "opt-in (sockets that send recover:true or a pid get offsets and a pid) or always (default opt-in).") var recoveryOffsets: String?
    @Option(name: .customLong("tls-cert"), help: "PEM certificate chain; with --tls-key serves wss:// and https://.") var tlsCert: String?
    @Option(name: .customLong("tls-key"), help: "PEM private key for --tls-cert.") var tlsKey: String?
    @Flag(name: .customLong("no-deflate"), help: "Do not negotiate permessage-deflate.") var noDeflate = false
    @Option(name: .customLong("deflate-threshold"), help: "Messages below this many bytes go uncompressed (default 1024).") var deflateThreshold: Int?
    @Option(name: .customLong("echo-path"), help: "Serve a WebSocket echo endpoint at this path (conformance tests); off by default.") var echoPath: String?
    @Option(name: .customLong("drain-rate"), help: "Sockets told to go per second on shutdown (default 2000).") var drainRate: Int?
    @Option(name: .customLong("shutdown-timeout"), help: "Upper bound of a graceful shutdown, ms (default 30000).") var shutdownTimeout: Int?
    @Option(help: "redis://host:port[/db]: join the other relay nodes on this Redis.") var redis: String?
    @Option(name: .customLong("node-id"), help: "This node's id in the cluster (default: random).") var nodeID: String?
    @Option(name: .customLong("cluster-heartbeat-ms"), help: "Cluster heartbeat, ms; a node silent for 3 heartbeats leaves presence (default 2000).") var clusterHeartbeatMs: Int?
    @Option(name: .customLong("webhook-url"), help: "http(s) URL that receives signed webhooks; repeatable or comma-separated.") var webhookURLs: [String] = []
    @Option(name: .customLong("webhook-secret"), help: "HMAC-SHA256 key of the X-Relay-Signature header (≥ 32 chars; required with --webhook-url).") var webhookSecret: String?
    @Option(name: .customLong("webhook-events"), help: "Client events also sent as webhooks, comma-separated (e.g. message:read,chat:seen).") var webhookEvents: String?
    @Option(name: .customLong("webhook-batch-size"), help: "Webhook events per request (default 100).") var webhookBatchSize: Int?
    @Option(name: .customLong("webhook-flush-ms"), help: "Longest wait for a webhook batch to fill, ms (default 200).") var webhookFlushMs: Int?
    @Option(name: .customLong("webhook-queue-size"), help: "Webhook events waiting per URL; beyond, new ones are dropped (default 10000).") var webhookQueueSize: Int?
    @Option(name: .customLong("heap-trim-interval-ms"), help: "How often freed heap memory may be given back to the system after connection churn (256 sessions ended or connections closed), ms; 0: never (default 10000).") var heapTrimIntervalMs: Int?
    @Option(name: .customLong("heap-trim-after"), help: "Sessions ended or connections closed since the last heap trim that make the next one due (default 256).") var heapTrimAfter: Int?
    @Option(name: .customLong("webhook-queue-bytes"), help: "Bytes of webhook events waiting per URL; beyond, new ones are dropped (default 67108864).") var webhookQueueBytes: Int?
    @Option(name: .customLong("webhook-max-attempts"), help: "Attempts per webhook batch; 0 retries without end (default 12).") var webhookMaxAttempts: Int?
    @Option(name: .customLong("webhook-max-backoff-ms"), help: "Largest webhook retry backoff, ms (default 30000).") var webhookMaxBackoffMs: Int?
    @Option(name: .customLong("webhook-timeout-ms"), help: "Time limit of one webhook request, ms (default 10000).") var webhookTimeoutMs: Int?
    @Option(name: .customLong("metrics-key"), help: "Bearer key required by GET /metrics (≥ 16 chars); unset: /metrics is open.") var metricsKey: String?
    @Option(name: .customLong("log-level"), help: "trace, debug, info, notice, warning, error, critical (default info).") var logLevel: String?
    @Option(name: .customLong("log-format"), help: "text or json (default text).") var logFormat: String?

    /// The flags that were given, by setting name.
    var given: [String: String] {
        var f: [String: String] = [:]
        func put(_ k: String, _ v: CustomStringConvertible?) { if let v { f[k] = v.description } }
        put("host", host); put("port", port); put("jwt-secret", jwtSecret); put("jwt-public-key", jwtPublicKey); put("jwt-leeway", jwtLeeway)
        put("api-key", apiKey); put("admin-key", adminKey); put("db", db); put("receipts-retention-days", receiptsRetentionDays)
        put("threads", threads); put("ping-interval", pingInterval); put("ping-timeout", pingTimeout); put("max-payload", maxPayload)
        put("max-connect-payload", maxConnectPayload); put("error-replies-per-second", errorRepliesPerSecond)
        put("receipts-per-user-per-second", receiptsPerUserPerSecond); put("max-pending-receipts", maxPendingReceipts); put("metrics-key", metricsKey)
        put("connect-timeout", connectTimeout); put("handshake-timeout", handshakeTimeout); put("max-event-bytes", maxEventBytes)
        put("packets-per-second", packetsPerSecond); put("event-bytes-per-second", eventBytesPerSecond); put("inbound-bytes-per-second", inboundBytesPerSecond)
        put("events-per-second", eventsPerSecond); put("event-burst", eventBurst)
        if !rates.isEmpty { f["rate"] = rates.joined(separator: ",") }
        put("max-rooms-per-connection", maxRoomsPerConnection); put("max-members-per-room", maxMembersPerRoom)
        put("max-connections", maxConnections); put("max-connections-per-user", maxConnectionsPerUser); put("max-connections-per-ip", maxConnectionsPerIP)
        put("allowed-origins", allowedOrigins)
        if proxyProtocol { f["proxy-protocol"] = "true" }
        put("trusted-proxies", trustedProxies)
        if disableCustomEvents { f["disable-custom-events"] = "true" }
        put("typing-window-ms", typingWindowMs); put("typing-expiry-ms", typingExpiryMs)
        put("token-expiry-notice-ms", tokenExpiryNoticeMs); put("revocation-ttl-s", revocationTTLs)
        put("history-size", historySize); put("history-ttl-ms", historyTTLMs); put("history-max-bytes", historyMaxBytes); put("history-stream-bytes", historyStreamBytes)
        put("recovery-window-ms", recoveryWindowMs); put("recovery-offsets", recoveryOffsets)
        put("recovery-takeover-after-ms", recoveryTakeoverAfterMs)
        put("tls-cert", tlsCert); put("tls-key", tlsKey)
        if noDeflate { f["no-deflate"] = "true" }
        put("deflate-threshold", deflateThreshold); put("echo-path", echoPath); put("drain-rate", drainRate); put("shutdown-timeout", shutdownTimeout)
        if !webhookURLs.isEmpty { f["webhook-url"] = webhookURLs.joined(separator: ",") }
        put("webhook-secret", webhookSecret); put("webhook-events", webhookEvents); put("webhook-batch-size", webhookBatchSize)
        put("webhook-flush-ms", webhookFlushMs); put("webhook-queue-size", webhookQueueSize); put("webhook-queue-bytes", webhookQueueBytes); put("heap-trim-interval-ms", heapTrimIntervalMs); put("heap-trim-after", heapTrimAfter); put("webhook-max-attempts", webhookMaxAttempts)
        put("webhook-max-backoff-ms", webhookMaxBackoffMs); put("webhook-timeout-ms", webhookTimeoutMs)
        put("redis", redis); put("node-id", nodeID); put("cluster-heartbeat-ms", clusterHeartbeatMs); put("log-level", logLevel); put("log-format", logFormat)
        return f
    }

    func resolve(environment: [String: String]) throws -> [String: ConfigurationLoader.Resolved] {
        let file = try (config ?? environment["RELAY_CONFIG"]).map { try ConfigurationLoader.readFile($0) } ?? [:]
        return ConfigurationLoader.resolve(flags: given, environment: environment, file: file)
    }
}
