import Logging
import NIOConcurrencyHelpers
import NIOCore
import RelayBackends
import RelayCore
import RelayStore
import RelayLocks

/// What every connection and HTTP handler shares: configuration, the hub, the token verifier,
/// admission control, and the receipt service when there is one. The composition root of the
/// socket side: it makes the services each socket handler is given (`EventServices`,
/// `ConnectServices`, `ReceiptServices`), so that no handler reaches into the hub.
public final class RelayContext: Sendable {
    public let configuration: RelayConfiguration
    /// The sessions' limits and timings, one copy for all of them.
    public let sessionConfiguration: SharedSessionConfiguration
    public let hub: Hub
    /// Checks a token; completes on the loop passed in. Defaults to `verifier`.
    public let authenticate: @Sendable (String, any EventLoop) -> EventLoopFuture<Result<AuthenticatedUser, RelayError>>
    /// What a connected socket's event handlers are given.
    let events: EventServices
    /// What a socket's CONNECT is given.
    let connect: ConnectServices
    /// What a socket's receipts are given.
    let receiptServices: ReceiptServices
    public let admission: AdmissionControl
    /// The durable receipt store; `nil` disables receipts (`store_unavailable`).
    public let receipts: (any ReceiptStore)?
    public let logger: Logger
    /// This node's long-polling sessions by Engine.IO sid.
    let pollingSessions = PollingRegistry()
    private let nextID = AuditedLock<UInt64>(0)

    public convenience init(configuration: RelayConfiguration, hub: Hub, verifier: TokenVerifier, receipts: (any ReceiptStore)?, logger: Logger) {
        self.init(configuration: configuration, hub: hub, receipts: receipts, logger: logger) { token, eventLoop in
            let promise = eventLoop.makePromise(of: Result<AuthenticatedUser, RelayError>.self)
            Task { promise.succeed(await verifier.verify(token)) }
            return promise.futureResult
        }
    }

    public init(
        configuration: RelayConfiguration, hub: Hub, receipts: (any ReceiptStore)?, logger: Logger,
        authenticate: @escaping @Sendable (String, any EventLoop) -> EventLoopFuture<Result<AuthenticatedUser, RelayError>>
    ) {
        self.configuration = configuration
        self.sessionConfiguration = SharedSessionConfiguration(configuration.sessionConfiguration)
        self.receipts = receipts
        self.hub = hub
        self.authenticate = authenticate
        self.admission = AdmissionControl(
            maxConnections: configuration.connections.maxConnections, maxPerIP: configuration.connections.maxConnectionsPerIP,
            authFailures: configuration.auth.authFailuresPerIP, maxPendingConnects: configuration.connections.maxPendingConnects,
            metrics: hub.metrics.connections)
        self.logger = logger
        self.events = EventServices(hub: hub, authenticate: authenticate)
        self.connect = ConnectServices(hub: hub, admission: admission, authenticate: authenticate, configuration: configuration, logger: logger)
        self.receiptServices = ReceiptServices(hub: hub, store: receipts, settings: configuration.receipts)
    }

    var clock: RelayClock { hub.clock }
    var metrics: RelayMetrics { hub.metrics }

    /// The partition of the loop a connection lives on.
    func partition(for loop: any EventLoop) -> LoopPartition { hub.partition(for: loop) }

    func makeConnectionID() -> ConnectionID {
        ConnectionID(nextID.withLockedValue { $0 += 1; return $0 })
    }
}

/// Random ids for `sid`s: 16 random bytes, base64url without padding.
enum RandomID {
    /// 88 random bits as 15 base64url characters: unguessable, and short enough for Swift to
    /// keep the string inline (no allocation per id, per session and per hub table entry).
    static func make() -> String {
        var rng = SystemRandomNumberGenerator()
        let a = rng.next() as UInt64
        let b = rng.next() as UInt32
        var bytes: [UInt8] = []
        bytes.reserveCapacity(11)
        for i in 0..<8 { bytes.append(UInt8(truncatingIfNeeded: a >> (i * 8))) }
        for i in 0..<3 { bytes.append(UInt8(truncatingIfNeeded: b >> (i * 8))) }
        return Base64URL.encode(bytes)
    }

    /// 128 random bits as 22 base64url characters, for a recovery `pid` (a bearer secret).
    static func makeSecret() -> String {
        var rng = SystemRandomNumberGenerator()
        var bytes: [UInt8] = []
        for v in [rng.next() as UInt64, rng.next() as UInt64] {
            for i in 0..<8 { bytes.append(UInt8(truncatingIfNeeded: v >> (i * 8))) }
        }
        return Base64URL.encode(bytes)
    }
}
