import ArgumentParser
import Foundation
import Logging
import RelayCore
import RelayServer
import ServiceLifecycle

/// `relay serve` (the default): runs the relay until SIGTERM/SIGINT.
///
/// Every setting can come from a flag, an environment variable (`RELAY_` + the flag name in
/// upper snake case) or the JSON config file (`--config`), in that order of precedence.
struct ServeCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "serve", abstract: "Run the relay (the default command).")

    @OptionGroup var settings: SettingsOptions

    func run() async throws {
        let env = ProcessInfo.processInfo.environment
        var resolved: [String: ConfigurationLoader.Resolved]
        let configuration: RelayConfiguration
        let devMode: Bool
        do {
            resolved = try settings.resolve(environment: env)
            (configuration, devMode) = try ConfigurationLoader.build(&resolved)
        } catch let error as ConfigurationLoader.ConfigError {
            throw ValidationError("invalid configuration:\n" + error.description)
        }
        let logger = RelayLogging.bootstrap(level: resolved["log-level"]?.value ?? "info", format: resolved["log-format"]?.value ?? "text")

        var banner = "relay \(RelayVersion.string) configuration:\n" + ConfigurationLoader.describe(resolved) + "\n"
        if devMode, case .hs256(let secret) = configuration.jwt {
            let token = try await TokenIssuer.sign(secret: secret, subject: "dev-user", rooms: ["*"], ttlSeconds: 86_400)
            banner += """
                ==================== DEV MODE — NOT FOR PRODUCTION ====================
                No JWT secret configured: generated throwaway credentials for this run only.
                  JWT secret (HS256): \(secret)
                  API key:            \(configuration.apiKey)
                  Admin key:          \(configuration.adminKey)
                  Sample token (sub=dev-user, rooms=*, 24 h):
                  \(token)
                =======================================================================

                """
        }
        // Unbuffered, so it shows up even when stdout is a file or a pipe.
        FileHandle.standardOutput.write(Data(banner.utf8))

        let server = try await RelayServer.make(configuration: configuration, logger: logger)
        let startupLogger = logger
        let service = RelayService(server: server) { server in
            let address = server.localAddress
            startupLogger.notice("relay listening on \(address?.ipAddress ?? "?"):\(address?.port ?? 0)")
        }
        let group = ServiceGroup(
            configuration: .init(
                services: [.init(service: service)] + server.backgroundServices.map { .init(service: $0) },
                gracefulShutdownSignals: [.sigterm, .sigint], logger: logger))
        try await group.run()
    }
}

/// `relay check-config FILE`: validates a config file (with the environment applied) and
/// prints the resolved settings, secrets redacted.
struct CheckConfigCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "check-config", abstract: "Validate a JSON config file and print the resolved settings.")

    @Argument(help: "The JSON config file.") var file: String

    func run() async throws {
        do {
            let fileValues = try ConfigurationLoader.readFile(file)
            var resolved = ConfigurationLoader.resolve(flags: [:], environment: ProcessInfo.processInfo.environment, file: fileValues)
            let (_, devMode) = try ConfigurationLoader.build(&resolved)
            print("\(file): OK\(devMode ? " (dev mode: no JWT secret or public key)" : "")")
            print(ConfigurationLoader.describe(resolved))
        } catch {
            // Both calls throw only ConfigError (typed throws).
            FileHandle.standardError.write(Data("\(file): invalid\n\(error.description)\n".utf8))
            throw ExitCode(1)
        }
    }
}
