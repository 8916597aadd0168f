import Logging
import ServiceLifecycle

/// Runs a `RelayServer` under swift-service-lifecycle: start, wait for SIGTERM/SIGINT, drain.
public struct RelayService: Service {
    public let server: RelayServer
    private let onStarted: @Sendable (RelayServer) -> Void

    public init(server: RelayServer, onStarted: @escaping @Sendable (RelayServer) -> Void = { _ in }) {
        self.server = server
        self.onStarted = onStarted
    }

    public func run() async throws {
        try await server.start()
        onStarted(server)
        try? await gracefulShutdown()
        try await server.shutdown()
    }
}
