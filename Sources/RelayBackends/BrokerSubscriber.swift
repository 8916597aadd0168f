import RelayCore
import RelayLocks

/// What a broker hands the events of this node's subscriptions to: the events other nodes
/// publish (and, with Redis, this node's own recoverable ones, which come back through the
/// stream's channel like everyone's). The node's `Publisher` subscribes itself when it is made,
/// so a cluster event enters the fan-out the way a local one does, with no closure in between.
public protocol BrokerSubscriber: AnyObject, Sendable {
    /// An event of `stream`, with its offset when it has one and how the publishing node wants
    /// it delivered.
    func received(_ publication: Publication, on stream: StreamKey, offset: StreamOffset?, routing: Routing)
}

/// A broker's one subscriber, held weakly (the subscriber holds the broker), set once before the
/// broker starts and read on every received event.
package final class SubscriberSlot: Sendable {
    private struct Reference: Sendable {
        weak var subscriber: (any BrokerSubscriber)?
    }

    /// Audited like every shared lock.
    private let box = AuditedLock(Reference())

    package init() {}

    package func set(_ subscriber: any BrokerSubscriber) {
        box.withLockedValue { $0.subscriber = subscriber }
    }

    package var subscriber: (any BrokerSubscriber)? {
        box.withLockedValue { $0.subscriber }
    }
}
