import ArgumentParser
import Foundation

@main
struct RelayLoad: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "relay-load",
        abstract: "Load generator for Relay and other WebSocket servers. Every scenario is bounded in time and count and stops by itself.",
        subcommands: [
            ConnectionsScenario.self, FanoutScenario.self, TypingScenario.self, LocationScenario.self,
            ReceiptsScenario.self, SlowConsumerScenario.self, StoreReceiptsScenario.self, HubLocksScenario.self, ChatScenario.self,
        ]
    )
}

/// Options every network scenario takes.
struct CommonOptions: ParsableArguments {
    @Option(help: "Server host (loopback only).") var host = "127.0.0.1"
    @Option(help: "Server port.") var port = 8080
    @Option(help: "Several relay nodes, host:port,host:port: sockets are spread over them round-robin (multi-node mode).")
    var nodes: String?
    @Option(name: .customLong("protocol"), help: "socketio (Engine.IO v4 / Socket.IO v5) or raw (plain JSON text frames).")
    var wireName = "socketio"
    @Option(help: "WebSocket path (default: /socket.io/?EIO=4&transport=websocket, or / for raw).") var path: String?
    @Option(help: "The relay's HS256 secret, to mint tokens; env RELAY_JWT_SECRET.") var secret = ProcessInfo.processInfo.environment["RELAY_JWT_SECRET"] ?? ""
    @Option(help: "Generator event loop threads.") var threads = 2
    @Option(name: .customLong("source-addresses"), help: "Spread sockets over this many loopback source addresses (127.0.0.2…); 0 uses the default.")
    var sourceAddresses = 0
    @Option(name: .customLong("relay-pid"), help: "PID of the server under test, for RSS and CPU readings from /proc.") var relayPID: Int32?
    @Flag(help: "Print one JSON object instead of a table.") var json = false
    @Option(name: .customLong("max-error-rate"), help: "Exit non-zero when errors exceed this fraction of operations.") var maxErrorRate = 0.01
    @Option(name: .customLong("setup-timeout"), help: "Seconds allowed for opening the sockets and joining their rooms; sockets not opened by then count as connect failures. Joining a room of N costs the server about N²/2 presence deliveries: a room of 10 000 needs several minutes here.")
    var setupTimeout = 120.0
    @Option(name: .customLong("phase-file"), help: "Write the run's phase to this file (`measuring` when the measured window opens, `done` when it closes), so a profiler can record that window only.")
    var phaseFile: String?

    /// Records the run's phase in `--phase-file`, when given.
    func mark(_ phase: String) {
        guard let phaseFile else { return }
        try? Data((phase + "\n").utf8).write(to: URL(fileURLWithPath: phaseFile), options: .atomic)
    }

    var wire: WireProtocol { WireProtocol(rawValue: wireName) ?? .socketio }

    func validate() throws {
        guard WireProtocol(rawValue: wireName) != nil else { throw ValidationError("--protocol is socketio or raw") }
        guard host.hasPrefix("127.") || host == "localhost" || host == "::1" else {
            throw ValidationError("relay-load only targets loopback addresses")
        }
        if let nodes {
            for n in nodes.split(separator: ",") {
                let parts = n.split(separator: ":")
                guard parts.count == 2, parts[0].hasPrefix("127."), Int(parts[1]) != nil else { throw ValidationError("--nodes takes 127.x.x.x:port entries") }
            }
        }
        if wire == .socketio && secret.utf8.count < 32 { throw ValidationError("--secret (the relay's JWT secret, ≥ 32 bytes) is required with --protocol socketio") }
    }
}

/// Prints the report and turns an error rate over the threshold into a failing exit code.
func finish(_ report: Report, errors: Int, operations: Int, options: CommonOptions) throws {
    var report = report
    let rate = operations > 0 ? Double(errors) / Double(operations) : (errors > 0 ? 1 : 0)
    report.add("error_rate", rate)
    report.failed = rate > options.maxErrorRate
    print(report.render(json: options.json))
    if report.failed { throw ExitCode(2) }
}
