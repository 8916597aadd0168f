import Foundation
import RelayCore
import RelayRedis

extension ConfigurationLoader {
    /// Every setting, once, in the order of `relay serve --help`, README and the startup banner.
    /// Rules between settings are `applyRules` (ConfigurationLoader.swift).
    public static let settings: [Setting] = [
        .text("host", default: "127.0.0.1", "address to listen on") { $0.listener.host = $1 },
        .int("port", 8080, max: 65535, "port to listen on; 0 picks a free one (the log line `relay listening on HOST:PORT` tells which)") { $0.listener.port = $1 },
        .text("jwt-secret", unset: "dev mode", secret: true,
              "HS256 secret for client tokens, at least 32 bytes. Neither it nor `jwt-public-key`: dev mode (throwaway secret and keys, printed at startup)"),
        .checkedText("jwt-public-key", "PEM file with an ES256 public key; tokens must then be ES256") { c, path in
            guard let pem = try? String(contentsOfFile: path, encoding: .utf8) else { return "jwt-public-key: cannot read \(path)" }
            c.auth.jwt = .es256(publicKeyPEM: pem)
            return nil
        },
        .int("jwt-leeway", 30, "accepted clock skew on `exp` and `nbf`, seconds (at most 3600)") { $0.auth.jwtLeewaySeconds = Int64(min($1, 3600)) },
        .text("api-key", unset: "dev mode", secret: true, minLength: 16, "bearer key of the backend API, at least 16 characters") { $0.auth.apiKey = $1 },
        .text("admin-key", unset: "dev mode", secret: true, minLength: 16, "bearer key of the admin API, at least 16 characters") { $0.auth.adminKey = $1 },
        .text("db", default: "relay.sqlite", "SQLite file for delivery receipts, created on first start") { $0.receipts.databasePath = $1 },
        .int("receipts-retention-days", 30, "delete older receipts in the background, days (0 keeps them)") { $0.receipts.retentionDays = $1 > 0 ? $1 : nil },
        .int("threads", nil, min: 1, unset: "cores - 1 (at least 1)", "event loop threads") { $0.listener.eventLoopThreads = $1 },
        .int("ping-interval", 25_000, min: 1, "Engine.IO `pingInterval`, ms") { $0.engine.pingIntervalMs = $1 },
        .int("ping-timeout", 20_000, min: 1, "Engine.IO `pingTimeout`, ms") { $0.engine.pingTimeoutMs = $1 },
        .int("max-payload", 1_000_000, min: 16, "largest inbound message, bytes (close 1009 beyond)") { $0.engine.maxPayload = $1 },
        .int("max-connect-payload", 16_384, min: 1024,
             "largest frame or message before CONNECT succeeded, bytes (close 1009, refused at the frame header)") { $0.engine.maxConnectPayload = $1 },
        .int("connect-timeout", 10_000, min: 1, "time to send CONNECT after the socket opens, ms") { $0.engine.connectTimeoutMs = $1 },
        .int("connect-refusals", 3, min: 1,
             "refused CONNECTs one Engine.IO session may have: each refusal (`44`) leaves the session open for another `40` within a new `connect-timeout`, as the reference server does; the last also closes it (4003). 1: the first refusal closes") { $0.engine.maxConnectRefusals = $1 },
        .int("upgrade-timeout", 10_000, min: 1, "time for a WebSocket probe to finish the upgrade from long-polling (`2probe` … `5`), and the window after it in which late polling requests are still the session's, ms") { $0.engine.upgradeTimeoutMs = $1 },
        .int("handshake-timeout", 10_000, min: 1, "time to finish the HTTP request (upgrade or API call), ms") { $0.listener.handshakeTimeoutMs = $1 },
        .int("max-event-bytes", 65_536, min: 16,
             "largest client event, text or binary, bytes, as each recipient is charged (attachments as base64, as long-polling carries them); larger: `payload_too_large`") {
            $0.events.maxEventBytes = $1
        },
        .number("packets-per-second", 250, atLeast: 1,
                "Engine.IO packets per connection per second on either transport, before and after CONNECT, pings and attachments included (burst 2×); past it: close 1008") {
            $0.events.inbound.packets = .init(perSecond: $1, burst: $1 * 2)
        },
        .int("inbound-bytes-per-second", 1_048_576, min: 1024,
             "bytes of Engine.IO packets and WebSocket control frames per connection per second, either transport, before and after CONNECT (burst 4×, at least 2 × `max-payload`); past it: close 1008") {
            $0.events.inbound.bytes = .init(perSecond: Double($1), burst: Double($1) * 4)
        },
        .int("event-bytes-per-second", 262_144, min: 1,
             "client event bytes per connection per second (burst 2×, at least `max-event-bytes`); past it: `rate_limited`. By default one sender's whole burst is half a connection's outbound limit (1 MiB, raised to at least two of the largest events), so no event a sender may send ends a recipient that reads") {
            $0.events.inbound.eventBytes = .init(perSecond: Double($1), burst: Double($1) * 2)
        },
        .number("events-per-second", 50, "sustained events per connection per second") { $0.events.eventsPerSecond.perSecond = $1 },
        .number("event-burst", 100, "event burst per connection") { $0.events.eventsPerSecond.burst = $1 },
        .list("rate", default: "control=20:50,typing=10:20,reaction=20:40,location=10:20,receipt=200:400,custom=30:60",
              "per-kind event budgets `KIND=PER_SECOND[:BURST]` (burst: 2 × PER_SECOND when left out), KIND one of "
                + RateClass.allCases.map { "`\($0.rawValue)`" }.joined(separator: ", ") + "; a kind not given keeps its default (PROTOCOL §9)") { c, specs in
            specs.compactMap { (spec: String) -> String? in
                let parts = spec.split(separator: "=", maxSplits: 1)
                let numbers = parts.count == 2 ? parts[1].split(separator: ":").compactMap { Double($0) } : []
                guard parts.count == 2, let kind = RateClass(rawValue: String(parts[0])), (1...2).contains(numbers.count), numbers.allSatisfy({ $0 > 0 }) else {
                    return "rate: expected KIND=PER_SECOND[:BURST] with KIND one of \(RateClass.allCases.map(\.rawValue).joined(separator: ", ")); got \(spec)"
                }
                c.events.eventsPerSecondByClass[kind] = .init(perSecond: numbers[0], burst: numbers.count == 2 ? numbers[1] : numbers[0] * 2)
                return nil
            }
        },
        .number("error-replies-per-second", 5,
                "error replies (error acks and `error` events) a connection may cause per second (burst 4×, at least 20); past it: close 1008") {
            $0.events.errorReplies = .init(perSecond: $1, burst: max(20, $1 * 4))
        },
        .number("receipts-per-user-per-second", 400, "receipts one user may write per second over all their sockets (burst 2×); past it: `rate_limited`") {
            $0.receipts.perUser = .init(perSecond: $1, burst: $1 * 2)
        },
        .int("max-pending-receipts", 256, min: 1, "receipts of one connection awaiting commit; more: `rate_limited`") { $0.receipts.maxPendingPerConnection = $1 },
        .int("receipt-window-ms", 0,
             "coalesce receipt forwards per room and kind over this window: one batch event `{room, kind, items}` for every reader in it (`from` only when there is one reader), at most 100 items, instead of one per commit; 0: each commit's at once (PROTOCOL §4)") {
            $0.receipts.forwardWindowMs = Int64($1)
        },
        .list("receipt-audience", default: "delivered=room,read=room",
              "who gets a committed receipt's forward, per kind `KIND=AUDIENCE` (KIND `delivered` or `read`): `room`, every socket of the room but the sender's and the authors' devices outside it; or `devices`, only the authors' devices and the reader's other devices (PROTOCOL §4)") { c, specs in
            specs.compactMap { (spec: String) -> String? in
                let parts = spec.split(separator: "=", maxSplits: 1).map(String.init)
                guard parts.count == 2, let kind = ReceiptKind(rawValue: parts[0]), let audience = ReceiptAudience(rawValue: parts[1]) else {
                    return "receipt-audience: expected KIND=AUDIENCE with KIND delivered or read and AUDIENCE room or devices; got \(spec)"
                }
                c.receipts.audiences[kind] = audience
                return nil
            }
        },
        .int("max-rooms-per-connection", 100, min: 1, "rooms per connection") { $0.events.maxRoomsPerConnection = $1 },
        .number("user-joins-per-second", 100, atLeast: 1,
                "room joins per user per second across all of the user's sockets and reconnects: rooms named in CONNECT, `room:join`, recovery (burst 4×); past it the join is refused `rate_limited`") {
            $0.events.userJoins = .init(perSecond: $1, burst: $1 * 4)
        },
        .int("max-members-per-room", 10_000, min: 1, "members per room") { $0.events.maxMembersPerRoom = $1 },
        .int("max-connections", 100_000, min: 1, "connections in total") { $0.connections.maxConnections = $1 },
        .int("max-pending-connects", 1_000, min: 0,
             "CONNECTs being set up (a reconnect storm's queue) past which a new session is refused at its handshake: HTTP 503 `server_busy` with `Retry-After`, and the client's backoff brings it back; 0: no limit") { $0.connections.maxPendingConnects = $1 },
        .int("max-connections-per-user", 20, min: 1, "connections per user") { $0.connections.maxConnectionsPerUser = $1 },
        .int("max-connections-per-ip", 1_000, min: 1, "connections per client IP") { $0.connections.maxConnectionsPerIP = $1 },
        .int("max-live-shares-per-connection", 16, min: 1,
             "live location shares one connection may run at once (`location:share-live` beyond: `rate_limited`)") { $0.connections.maxLiveSharesPerConnection = $1 },
        .flag("proxy-protocol",
              "every connection must start with a PROXY protocol header (v1 or v2) from a trusted proxy, e.g. HAProxy `send-proxy-v2`; connections without one, or from another peer, are closed. Needs `trusted-proxies`") {
            $0.listener.proxyProtocol = $1
        },
        .list("trusted-proxies",
              "IPs/CIDRs (IPv4, IPv6) of the load balancers whose word about the client is believed: their PROXY header and their `X-Forwarded-For` (right-most entry that is not a trusted proxy). From anyone else `X-Forwarded-For` is ignored. Per-IP limits, logs and the admin API then see the real client (PROTOCOL §1)") { c, entries in
            var ranges: [IPAddressRange] = []
            var problems: [String] = []
            for entry in entries {
                do throws(IPAddressRange.ParseError) { ranges.append(try IPAddressRange(parsing: entry)) } catch { problems.append("trusted-proxies: \(error)") }
            }
            c.listener.trustedProxies = TrustedProxies(ranges)
            return problems
        },
        .list("allowed-origins",
              "browser `Origin`s allowed to open sockets (`*`: any). Always admitted: no `Origin`, `ws:`/`wss:` origins (native clients) and the relay's own host") {
            $0.listener.allowedOrigins = $1
            return []
        },
        .flag("disable-custom-events", "refuse custom `entity:action` events") { $0.events.customEventsEnabled = !$1 },
        .int("typing-window-ms", 100, min: 1, "typing coalescing window, ms") { $0.events.typingWindowMs = Int64($1) },
        .int("typing-expiry-ms", 5_000, min: 1, "a `typing:start` not refreshed for this long expires, ms") { $0.events.typingExpiryMs = Int64($1) },
        .int("presence-grace-ms", 5_000,
             "a user whose connection dropped (the network, a missed pong, a shutdown, an expired token; not `41` or a kick) stays present in its rooms and online for this long: back within it, nobody sees a `presence:leave`/`presence:join` or an offline/online webhook. Typing stops at once. 0: presence ends with the connection, ms") {
            $0.events.presenceGraceMs = $1
        },
        .int("token-expiry-notice-ms", 60_000,
             "`auth:expiring` this long before a token's `exp`, ms (0: never; the socket is closed at `exp` + `jwt-leeway`)") { $0.auth.tokenExpiryNoticeMs = Int64($1) },
        .int("revocation-ttl-s", 604_800, min: 60,
             "how long a backend revocation (`POST /api/v1/users/{user}/disconnect` with `revoke`) is kept, seconds; at least the longest token lifetime") {
            $0.auth.revocationTTLSeconds = Int64($1)
        },
        .int("history-size", 200, "recoverable events kept per room and per user (0: no history, no recovery; PROTOCOL §12)") { $0.recovery.historyLimits.maxEvents = $1 },
        .int("history-ttl-ms", 120_000, "how long recoverable events are kept, ms") { $0.recovery.historyLimits.maxAgeMs = Int64($1) },
        .int("history-max-bytes", 268_435_456, "memory history of all rooms and users together, bytes") { $0.recovery.historyLimits.maxBytes = $1 },
        .int("history-stream-bytes", 2_097_152, min: 1,
             "memory history of one room or one user, bytes (oldest out first; the newest event always stays). In Redis a stream is bounded by `history-size` × `max-event-bytes`") {
            $0.recovery.historyLimits.maxStreamBytes = $1
        },
        .int("recovery-window-ms", 120_000, "how long a dropped session can be recovered, ms (at most `history-ttl-ms`)") { $0.recovery.windowMs = Int64($1) },
        .int("recovery-takeover-after-ms", 1_000,
             "a reconnect with the `pid` of a connection the relay still holds (its drop not noticed yet) takes it over (closed 4009) when that connection is at least this old, ms") {
            $0.recovery.takeoverAfterMs = Int64($1)
        },
        .choice("recovery-offsets", "opt-in", among: ["opt-in", "always"],
                "`always` gives every socket offsets and a `pid`, `opt-in` only those that send `recover: true` (or a `pid`)") {
            $0.recovery.offsetsForEverySocket = $1 == "always"
        },
        .checkedText("tls-cert", "PEM certificate chain; with `tls-key`, serves `wss://` and `https://`") { c, path in
            guard FileManager.default.isReadableFile(atPath: path) else { return "tls-cert: cannot read \(path)" }
            c.listener.tlsCertificatePath = path
            return nil
        },
        .checkedText("tls-key", "PEM private key of `tls-cert`") { c, path in
            guard FileManager.default.isReadableFile(atPath: path) else { return "tls-key: cannot read \(path)" }
            c.listener.tlsKeyPath = path
            return nil
        },
        .flag("no-deflate", "do not negotiate permessage-deflate") { $0.engine.deflateEnabled = !$1 },
        .int("deflate-threshold", 1024, "smallest message compressed, bytes") { $0.engine.deflateThresholdBytes = $1 },
        .checkedText("echo-path", unset: "off", "a WebSocket echo endpoint at this path on the same stack (conformance tests only)") { c, p in
            guard p.hasPrefix("/"), !p.hasPrefix("/socket.io"), !p.hasPrefix("/api/"), !p.hasPrefix("/admin/") else {
                return "echo-path: expected a path like /echo outside /socket.io, /api and /admin, got \(p)"
            }
            c.listener.echoPath = p
            return nil
        },
        .int("drain-rate", 0, min: 0,
             "sockets told to go per second during a graceful shutdown, so they do not all reconnect to the other nodes at once; 0: 2000 with `--redis`, all at once without (no other node takes them)") {
            $0.lifecycle.drainRatePerSecond = $1
        },
        .int("shutdown-timeout", 30_000, "upper bound of a graceful shutdown, ms") { $0.lifecycle.shutdownTimeoutMs = $1 },
        .int("heap-trim-interval-ms", 10_000,
             "how often freed heap memory may be given back to the system (glibc `malloc_trim`, on NIO's thread pool) after connection churn, ms; 0: never") {
            $0.lifecycle.heapTrimIntervalMs = $1
        },
        .int("heap-trim-after", 256, min: 1, "sessions ended or connections closed since the last heap trim that make the next one due") { $0.lifecycle.heapTrimAfterSessions = $1 },
        .checkedText("redis", secret: true, "`redis://host:port[/db]` (one Redis), `redis://host:port,host:port,…` (Redis Cluster seeds) or `redis+sentinel://host:port,…/<master>[/db]`: join the other nodes through Redis (PROTOCOL §10)") { c, url in
            // The URL may hold a password: it is not repeated in the message.
            guard RedisEndpoint(url: url) != nil else { return "redis: expected redis://host:port[/db], redis://host:port,host:port,… or redis+sentinel://host:port,…/<master>[/db]" }
            c.cluster.redisURL = url
            return nil
        },
        .text("node-id", unset: "random", "this node's id in the cluster") { $0.cluster.nodeID = $1 },
        .int("cluster-heartbeat-ms", 2_000, min: 50, "cluster heartbeat, ms; a node silent for 3 heartbeats leaves presence") { $0.cluster.heartbeatMs = Int64($1) },
        .list("webhook-url",
              "http(s) URLs that receive signed webhooks: `user:online`/`offline`, `room:occupied`/`vacated`, allow-listed client events (PROTOCOL §13)") {
            $0.webhooks.urls = $1
            return []
        },
        .text("webhook-secret", secret: true, "HMAC-SHA256 key of the `X-Relay-Signature` header, at least 32 characters; required with `webhook-url`") {
            $0.webhooks.secret = $1
        },
        .list("webhook-events", "client events also sent as webhooks, e.g. `message:read,chat:seen`") {
            $0.webhooks.clientEvents = Set($1)
            return []
        },
        .int("webhook-batch-size", 100, min: 1, "webhook events per request") { $0.webhooks.batchSize = $1 },
        .int("webhook-flush-ms", 200, "longest wait for a webhook batch to fill, ms") { $0.webhooks.flushMs = Int64($1) },
        .int("webhook-queue-size", 10_000, min: 1, "webhook events waiting per URL (beyond: dropped and counted)") { $0.webhooks.queueSize = $1 },
        .int("webhook-queue-bytes", 67_108_864, min: 1024, "bytes of webhook events waiting per URL, as their JSON (beyond: dropped and counted)") {
            $0.webhooks.queueBytes = $1
        },
        .int("webhook-max-attempts", 12, "attempts per webhook batch (0: retry without end)") { $0.webhooks.maxAttempts = $1 },
        .int("webhook-max-backoff-ms", 30_000, min: 1, "largest webhook retry backoff, ms (exponential from 250 ms, jittered)") { $0.webhooks.maxBackoffMs = Int64($1) },
        .int("webhook-timeout-ms", 10_000, min: 1, "time limit of one webhook request, ms") { $0.webhooks.timeoutMs = Int64($1) },
        .text("metrics-key", unset: "open", secret: true, minLength: 16, "bearer key `GET /metrics` requires when set, at least 16 characters") { $0.auth.metricsKey = $1 },
        .choice("log-level", "info", among: ["trace", "debug", "info", "notice", "warning", "error", "critical"],
                "log level (one line per connect/disconnect at `info`, nothing per event)"),
        .choice("log-format", "text", among: ["text", "json"], "log format (`json`: one JSON object per line)"),
    ]

    static let byName = Dictionary(uniqueKeysWithValues: settings.map { ($0.name, $0) })
}
