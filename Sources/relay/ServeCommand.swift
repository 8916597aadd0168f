import ArgumentParser
import Foundation
import Logging
import RelayCore
import RelayServer
import ServiceLifecycle

/// `relay serve` (the default): runs the relay until SIGTERM/SIGINT.
///
/// Every setting can come from a flag, an environment variable (`RELAY_` + the flag name in
/// upper snake case) or the JSON config file (`--config`), in that order of precedence. The
/// flags are not declared here: `ConfigurationLoader` reads them from its one table of
/// settings, which also writes the help.
struct ServeCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "serve", abstract: "Run the relay (the default command).", discussion: ConfigurationLoader.helpText())

    @Option(help: "JSON config file (keys are the setting names); env RELAY_CONFIG.") var config: String?

    @Argument(parsing: .allUnrecognized, help: ArgumentHelp("Settings (listed above): --NAME VALUE, --NAME=VALUE, or --NAME alone for an on/off setting.", valueName: "setting"))
    var settings: [String] = []

    /// Unknown or malformed flags are mistakes in using `relay serve`: told with its usage line.
    func validate() throws {
        _ = try givenFlags()
    }

    func run() async throws {
        let env = ProcessInfo.processInfo.environment
        let flags = try givenFlags()
        var resolved: [String: ConfigurationLoader.Resolved]
        let configuration: RelayConfiguration
        let devMode: Bool
        do throws(ConfigurationLoader.ConfigError) {
            var file: [String: String] = [:]
            if let path = config ?? env["RELAY_CONFIG"] { file = try ConfigurationLoader.readFile(path) }
            resolved = ConfigurationLoader.resolve(flags: flags, environment: env, file: file)
            (configuration, devMode) = try ConfigurationLoader.build(&resolved)
        } catch {
            throw ValidationError("invalid configuration:\n" + error.description)
        }
        let logger = RelayLogging.bootstrap(level: resolved["log-level"]?.value ?? "info", format: resolved["log-format"]?.value ?? "text")

        var banner = "relay \(RelayVersion.string) configuration:\n" + ConfigurationLoader.describe(resolved) + "\n"
        if devMode, case .hs256(let secret) = configuration.auth.jwt {
            let token = try await TokenIssuer.sign(secret: secret, subject: "dev-user", rooms: ["*"], ttlSeconds: 86_400)
            banner += """
                ==================== DEV MODE — NOT FOR PRODUCTION ====================
                No JWT secret configured: generated throwaway credentials for this run only.
                  JWT secret (HS256): \(secret)
                  API key:            \(configuration.auth.apiKey)
                  Admin key:          \(configuration.auth.adminKey)
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

extension ServeCommand {
    /// The settings given as flags, by name.
    func givenFlags() throws -> [String: String] {
        do throws(ConfigurationLoader.ConfigError) {
            return try ConfigurationLoader.parseArguments(settings)
        } catch {
            throw ValidationError(error.description)
        }
    }
}

/// `relay settings`: every setting with its default and meaning; `--markdown`: README's table.
struct SettingsCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "settings", abstract: "List every setting; --markdown prints README's settings table.")

    @Flag(help: "Print the Markdown table of README's \"Configuration\" section.") var markdown = false

    func run() async throws {
        print(markdown ? ConfigurationLoader.markdownTable() : ConfigurationLoader.helpText(), terminator: "")
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
