import NIOCore
import RelayBackends
import RelayCore

/// What a connected socket's event handlers use (`ClientEventExecutor`, `RoomSync`,
/// `TokenRefresh`), given to them by the composition root: no handler reaches into the hub.
/// Made once per node; a handler holds it by reference.
final class EventServices: Sendable {
    let membership: Membership
    let presence: PresenceAnnouncer
    let typing: TypingService
    let locations: LiveLocationService
    let publisher: Publisher
    /// History and the heads of streams (a join's offset, `room:sync`).
    let broker: any Broker
    /// Client events are also told to the webhooks that take them.
    let webhooks: Webhooks?
    let revocations: Revocations
    /// Checks an `auth:refresh` token; completes on the loop passed in.
    let authenticate: TokenCheck
    let clock: RelayClock
    let metrics: RelayMetrics

    init(hub: Hub, authenticate: @escaping TokenCheck) {
        self.membership = hub.membership
        self.presence = hub.presence
        self.typing = hub.typing
        self.locations = hub.locations
        self.publisher = hub.publisher
        self.broker = hub.backends.broker
        self.webhooks = hub.backends.webhooks
        self.revocations = hub.revocations
        self.authenticate = authenticate
        self.clock = hub.clock
        self.metrics = hub.metrics
    }
}

/// Checks a token and completes on the loop passed in.
typealias TokenCheck = @Sendable (String, any EventLoop) -> EventLoopFuture<Result<AuthenticatedUser, RelayError>>
