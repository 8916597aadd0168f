import NIOCore
import RelayBackends
import RelayCore
import RelayLocks
import RelayStore

/// What a socket's receipts use (`SocketReceipts`): the durable store, the per-user quota
/// across a user's sockets, membership, and the forward of a committed receipt. Given by the
/// composition root; made once per node.
final class ReceiptServices: Sendable {
    /// `nil` disables receipts (`store_unavailable`).
    let store: (any ReceiptStore)?
    /// Receipts each user may still write (across all of their sockets), per second.
    let quota: AuditedLock<KeyedRateLimiter>
    let membership: Membership
    let publisher: Publisher
    let webhooks: Webhooks?
    let settings: ReceiptSettings
    let clock: RelayClock
    let metrics: RelayMetrics

    init(hub: Hub, store: (any ReceiptStore)?, settings: ReceiptSettings) {
        self.store = store
        self.quota = AuditedLock(KeyedRateLimiter(budget: settings.perUser))
        self.membership = hub.membership
        self.publisher = hub.publisher
        self.webhooks = hub.backends.webhooks
        self.settings = settings
        self.clock = hub.clock
        self.metrics = hub.metrics
    }

    /// Forwards a committed receipt to the room and the author's other devices (and tells the
    /// webhooks when they take it).
    func forward(_ receipt: Receipt, excludeConnection: ConnectionID?) {
        webhooks?.clientEvent(name: receipt.kind.eventName, room: receipt.room, from: receipt.userID, payload: receipt.json, ts: receipt.ts)
        publisher.publishReceipt(receipt, audience: settings.audiences[receipt.kind], excludeConnection: excludeConnection)
    }
}
