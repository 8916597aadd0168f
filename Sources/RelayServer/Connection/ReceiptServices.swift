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
    /// Forwards coalesced per room (`receipt-window-ms` > 0); `nil`: each commit's at once.
    let windows: ReceiptForwardService?

    init(hub: Hub, store: (any ReceiptStore)?, settings: ReceiptSettings) {
        self.store = store
        self.quota = AuditedLock(KeyedRateLimiter(budget: settings.perUser))
        self.membership = hub.membership
        self.publisher = hub.publisher
        self.webhooks = hub.backends.webhooks
        self.settings = settings
        self.clock = hub.clock
        self.metrics = hub.metrics
        self.windows =
            settings.forwardWindowMs > 0
            ? ReceiptForwardService(
                windowMs: settings.forwardWindowMs, audiences: settings.audiences, stripes: Hub.defaultLockStripes, timerLoop: hub.partitions[0].eventLoop,
                clock: hub.clock, publisher: hub.publisher)
            : nil
    }

    /// Forwards a committed receipt to the room and the author's other devices (and tells the
    /// webhooks when they take it).
    func forward(_ receipt: Receipt, excludeConnection: ConnectionID?) {
        webhooks?.clientEvent(name: receipt.kind.eventName, room: receipt.room, from: receipt.userID, payload: receipt.json, ts: receipt.ts)
        if let windows { return windows.add([receipt], room: receipt.room, kind: receipt.kind) }
        publisher.publishReceipt(receipt, audience: settings.audiences[receipt.kind], excludeConnection: excludeConnection)
    }

    /// Forwards the new receipts of a committed batch (`from` the reader, sent on
    /// `excludeConnection`): at once, grouped, or with the room's window.
    func forward(batch receipts: [Receipt], room: String, kind: ReceiptKind, from user: String, excludeConnection: ConnectionID?) {
        if let windows { return windows.add(receipts, room: room, kind: kind) }
        publisher.publishReceipts(receipts, room: room, kind: kind, from: user, audience: settings.audiences[kind], excludeConnection: excludeConnection)
    }

    /// Forwards what the windows still hold (shutdown).
    func flushWindows() {
        windows?.flushAll()
    }
}
