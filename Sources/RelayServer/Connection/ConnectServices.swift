import Logging
import RelayBackends
import RelayCore

/// What a socket's CONNECT uses (`ConnectSetup`): the per-IP admission, the token check and its
/// revocations, membership, the broker (heads, history), the kept sessions and their handover.
/// Given by the composition root; made once per node.
final class ConnectServices: Sendable {
    let admission: AdmissionControl
    let authenticate: TokenCheck
    let revocations: Revocations
    let handover: RecoveryHandover
    let membership: Membership
    let broker: any Broker
    let keptSessions: any KeptSessionStore
    let recovery: RecoverySettings
    /// The bounds of the queue deliveries wait in while CONNECT is set up.
    let outbound: ConnectionLimits
    let clock: RelayClock
    let metrics: RelayMetrics
    let logger: Logger

    init(hub: Hub, admission: AdmissionControl, authenticate: @escaping TokenCheck, configuration: RelayConfiguration, logger: Logger) {
        self.admission = admission
        self.authenticate = authenticate
        self.revocations = hub.revocations
        self.handover = hub.handover
        self.membership = hub.membership
        self.broker = hub.backends.broker
        self.keptSessions = hub.backends.keptSessions
        self.recovery = configuration.recovery
        self.outbound = configuration.connections
        self.clock = hub.clock
        self.metrics = hub.metrics
        self.logger = logger
    }
}
