import ArgumentParser
import Foundation
import Logging
import RelayCore
import RelayServer
import ServiceLifecycle

/// `relay serve` (the default): runs the relay until SIGTERM/SIGINT.
struct ServeCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "serve", abstract: "Run the relay (the default command).")

    @Option(help: "Address to listen on.") var host = "127.0.0.1"
    @Option(help: "Port to listen on (0 picks a free one).") var port = 8080
    @Option(name: .customLong("jwt-secret"), help: "HS256 secret for client tokens (at least 32 bytes); env RELAY_JWT_SECRET. Without it: dev mode.")
    var jwtSecret: String?
    @Option(name: .customLong("jwt-public-key"), help: "PEM file with an ES256 public key; tokens must then be ES256.")
    var jwtPublicKey: String?
    @Option(name: .customLong("api-key"), help: "Bearer key of the backend API; env RELAY_API_KEY.") var apiKey: String?
    @Option(name: .customLong("admin-key"), help: "Bearer key of the admin API; env RELAY_ADMIN_KEY.") var adminKey: String?
    @Option(help: "SQLite file for delivery receipts.") var db = "relay.sqlite"
    @Option(name: .customLong("threads"), help: "Event loop threads (default: cores).") var threads: Int?
    @Option(name: .customLong("ping-interval"), help: "Engine.IO pingInterval, ms.") var pingInterval = 25_000
    @Option(name: .customLong("ping-timeout"), help: "Engine.IO pingTimeout, ms.") var pingTimeout = 20_000
    @Option(name: .customLong("max-payload"), help: "Largest inbound message, bytes (larger: close 1009).") var maxPayload = 1_000_000
    @Option(name: .customLong("connect-timeout"), help: "Time to send CONNECT after the socket opens, ms.") var connectTimeout = 10_000
    @Option(name: .customLong("max-event-bytes"), help: "Largest client event, bytes.") var maxEventBytes = 64 * 1024
    @Option(name: .customLong("events-per-second"), help: "Sustained events per second per connection.") var eventsPerSecond: Double = 50
    @Option(name: .customLong("event-burst"), help: "Event burst per connection.") var eventBurst: Double = 100
    @Option(name: .customLong("rate"), help: "Per-connection budget of one event kind, KIND=PER_SECOND[:BURST]; kinds: control, typing, reaction, location, receipt, custom. Repeatable.")
    var rates: [String] = []
    @Option(name: .customLong("max-rooms-per-connection")) var maxRoomsPerConnection = 100
    @Option(name: .customLong("max-members-per-room")) var maxMembersPerRoom = 10_000
    @Option(name: .customLong("max-connections")) var maxConnections = 100_000
    @Option(name: .customLong("max-connections-per-user")) var maxConnectionsPerUser = 20
    @Option(name: .customLong("max-connections-per-ip")) var maxConnectionsPerIP = 1_000
    @Option(name: .customLong("allowed-origins"), help: "Comma-separated Origins allowed to open sockets ('*' for any). Empty: only clients that send no Origin.")
    var allowedOrigins = ""
    @Flag(name: .customLong("disable-custom-events"), help: "Refuse custom entity:action events.") var disableCustomEvents = false
    @Option(name: .customLong("typing-window-ms"), help: "Typing coalescing window, ms.") var typingWindowMs: Int64 = 100
    @Option(name: .customLong("typing-expiry-ms"), help: "A typing:start not refreshed for this long expires, ms.") var typingExpiryMs: Int64 = 5_000
    @Option(name: .customLong("handshake-timeout"), help: "Time to complete an HTTP request or upgrade, ms.") var handshakeTimeout = 10_000
    @Option(name: .customLong("receipts-retention-days"), help: "Delete receipts older than this many days (0 keeps them forever).") var receiptsRetentionDays = 30
    @Option(name: .customLong("tls-cert"), help: "PEM certificate chain file; with --tls-key serves wss:// and https://.") var tlsCert: String?
    @Option(name: .customLong("tls-key"), help: "PEM private key file for --tls-cert.") var tlsKey: String?
    @Flag(name: .customLong("no-deflate"), help: "Do not negotiate permessage-deflate.") var noDeflate = false
    @Option(name: .customLong("deflate-threshold"), help: "Messages below this many bytes go uncompressed.") var deflateThreshold = 1024
    @Option(name: .customLong("echo-path"), help: "Serve a WebSocket echo endpoint at this path (conformance tests); off by default.") var echoPath: String?
    @Option(name: .customLong("drain-rate"), help: "Sockets told to go per second on shutdown.") var drainRate = 2_000
    @Option(name: .customLong("shutdown-timeout"), help: "Upper bound of a graceful shutdown, ms.") var shutdownTimeout = 30_000
    @Option(name: .customLong("log-level")) var logLevel = "info"

    func run() async throws {
        let env = ProcessInfo.processInfo.environment
        var logger = Logger(label: "relay")
        logger.logLevel = Logger.Level(rawValue: logLevel) ?? .info

        let secret = jwtSecret ?? env["RELAY_JWT_SECRET"]
        let devMode = secret == nil && jwtPublicKey == nil
        let jwt: RelayConfiguration.JWTAlgorithm
        let effectiveSecret = secret ?? TokenIssuer.randomSecret()
        if let path = jwtPublicKey {
            jwt = .es256(publicKeyPEM: try String(contentsOfFile: path, encoding: .utf8))
        } else {
            do { try TokenIssuer.validateSecret(effectiveSecret) } catch { throw ValidationError(error.description) }
            jwt = .hs256(secret: effectiveSecret)
        }
        let api = apiKey ?? env["RELAY_API_KEY"] ?? (devMode ? TokenIssuer.randomSecret(bytes: 16) : nil)
        let admin = adminKey ?? env["RELAY_ADMIN_KEY"] ?? (devMode ? TokenIssuer.randomSecret(bytes: 16) : nil)
        guard let api, let admin else { throw ValidationError("--api-key and --admin-key (or RELAY_API_KEY / RELAY_ADMIN_KEY) are required outside dev mode") }
        guard api.utf8.count >= 16, admin.utf8.count >= 16 else { throw ValidationError("API and admin keys must be at least 16 characters") }

        var config = RelayConfiguration(jwt: jwt, apiKey: api, adminKey: admin)
        config.host = host
        config.port = port
        config.databasePath = db
        config.receiptsRetentionDays = receiptsRetentionDays > 0 ? receiptsRetentionDays : nil
        if let threads { config.eventLoopThreads = max(1, threads) }
        config.pingIntervalMs = pingInterval
        config.pingTimeoutMs = pingTimeout
        config.maxPayload = maxPayload
        config.connectTimeoutMs = connectTimeout
        config.maxEventBytes = maxEventBytes
        config.eventsPerSecond = .init(perSecond: eventsPerSecond, burst: eventBurst)
        for spec in rates {
            let parts = spec.split(separator: "=", maxSplits: 1)
            let numbers = parts.count == 2 ? parts[1].split(separator: ":").compactMap { Double($0) } : []
            guard parts.count == 2, let kind = RateClass(rawValue: String(parts[0])), (1...2).contains(numbers.count), numbers.allSatisfy({ $0 > 0 }) else {
                throw ValidationError("--rate expects KIND=PER_SECOND[:BURST] with KIND one of \(RateClass.allCases.map(\.rawValue).joined(separator: ", ")); got \(spec)")
            }
            config.eventsPerSecondByClass[kind] = .init(perSecond: numbers[0], burst: numbers.count == 2 ? numbers[1] : numbers[0] * 2)
        }
        config.maxRoomsPerConnection = maxRoomsPerConnection
        config.maxMembersPerRoom = maxMembersPerRoom
        config.maxConnections = maxConnections
        config.maxConnectionsPerUser = maxConnectionsPerUser
        config.maxConnectionsPerIP = maxConnectionsPerIP
        config.allowedOrigins = allowedOrigins.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
        config.customEventsEnabled = !disableCustomEvents
        config.typingWindowMs = typingWindowMs
        config.typingExpiryMs = typingExpiryMs
        config.handshakeTimeoutMs = handshakeTimeout
        guard (tlsCert == nil) == (tlsKey == nil) else { throw ValidationError("--tls-cert and --tls-key go together") }
        config.tlsCertificatePath = tlsCert
        config.tlsKeyPath = tlsKey
        config.drainRatePerSecond = max(1, drainRate)
        config.shutdownTimeoutMs = max(0, shutdownTimeout)
        config.deflateEnabled = !noDeflate
        config.deflateThresholdBytes = max(0, deflateThreshold)
        if let echoPath {
            guard echoPath.hasPrefix("/"), !echoPath.hasPrefix("/socket.io"), !echoPath.hasPrefix("/api/") else {
                throw ValidationError("--echo-path must be a path like /echo outside /socket.io and /api")
            }
            config.echoPath = echoPath
        }

        if devMode {
            let token = try await TokenIssuer.sign(secret: effectiveSecret, subject: "dev-user", rooms: ["*"], ttlSeconds: 86_400)
            // Unbuffered, so the banner shows up even when stdout is a file or a pipe.
            FileHandle.standardOutput.write(Data("""
                ==================== DEV MODE — NOT FOR PRODUCTION ====================
                No --jwt-secret given: generated throwaway credentials for this run only.
                  JWT secret (HS256): \(effectiveSecret)
                  API key:            \(api)
                  Admin key:          \(admin)
                  Sample token (sub=dev-user, rooms=*, 24 h):
                  \(token)
                =======================================================================

                """.utf8))
        }

        let server = try await RelayServer.make(configuration: config, logger: logger)
        let startupLogger = logger
        let service = RelayService(server: server) { server in
            let address = server.localAddress
            startupLogger.info("relay listening on \(address?.ipAddress ?? "?"):\(address?.port ?? 0)")
        }
        let group = ServiceGroup(
            configuration: .init(services: [.init(service: service)], gracefulShutdownSignals: [.sigterm, .sigint], logger: logger))
        try await group.run()
    }
}
