import NIOCore
import RelayCore
import RelayStore

/// One socket's delivery receipts (`message:delivered` / `message:read`, their batches,
/// `receipt:sync`): stored, acked once committed — the socket writes the ack it returns, the
/// acks of one committed batch leaving in one write — then forwarded.
///
/// Bounds the store's queue per connection: at most `receipts.maxPendingPerConnection` receipts
/// awaiting their commit (the per-user quota across a user's sockets is the services').
/// Confined to the socket's loop, like the socket.
final class SocketReceipts {
    private let services: ReceiptServices
    /// Receipts of this socket handed to the store and not yet committed (or failed).
    private(set) var pending = 0

    init(services: ReceiptServices) {
        self.services = services
    }

    /// `message:delivered` / `message:read`: stored, acked after commit, then forwarded.
    func record(_ receipt: NewReceipt, ackID: Int64?, user: AuthenticatedUser, for socket: ClientSession) throws(RelayError) -> HandlerResult {
        let store = try admit(count: 1, room: receipt.room, user: user, for: socket)
        pending += 1
        let me = NIOLoopBound(self, eventLoop: socket.eventLoop)
        let (services, event, connection) = (services, receipt.kind.eventName, socket.connectionID)
        let update = store.record(receipt, on: socket.eventLoop).map { recorded -> SocketUpdate in
            me.value.pending -= 1
            var update = SocketUpdate(flush: .soon)
            update.reply = ackID.map { .ack(id: $0, payload: .object([("ok", true), ("id", .int(recorded.receipt.id))])) }
            // Forwarded once, when first stored; a repeat only gets its ack.
            if recorded.isNew { update.afterReply = { services.forward(recorded.receipt, excludeConnection: connection) } }
            return update
        }.recover { _ in
            me.value.pending -= 1
            return SocketUpdate(reply: .failure(RelayError(.storeUnavailable), event: event, ackID: ackID))
        }
        return .later(update)
    }

    /// A batch (`items`): the same checks and quotas per receipt, handed to the store together
    /// (one group commit), one ack listing each receipt's id, then the new ones forwarded grouped:
    /// one event to the room, one to each author's other devices.
    func record(
        batch receipts: [NewReceipt], room: String, kind: ReceiptKind, ackID: Int64?, user: AuthenticatedUser, for socket: ClientSession
    ) throws(RelayError) -> HandlerResult {
        let store = try admit(count: receipts.count, room: room, user: user, for: socket)
        pending += receipts.count
        let me = NIOLoopBound(self, eventLoop: socket.eventLoop)
        let (services, connection, count) = (services, socket.connectionID, receipts.count)
        let update = store.recordAll(receipts, on: socket.eventLoop).map { recorded -> SocketUpdate in
            me.value.pending -= count
            var update = SocketUpdate(flush: .soon)
            if let ackID {
                let ids = recorded.map { JSONValue.object([("messageId", .string($0.receipt.messageID)), ("id", .int($0.receipt.id))]) }
                update.reply = .ack(id: ackID, payload: .object([("ok", true), ("items", .array(ids))]))
            }
            let new = recorded.filter(\.isNew).map(\.receipt)
            if !new.isEmpty {
                update.afterReply = { services.forward(batch: new, room: room, kind: kind, from: user.userID, excludeConnection: connection) }
            }
            return update
        }.recover { _ in
            me.value.pending -= count
            return SocketUpdate(reply: .failure(RelayError(.storeUnavailable), event: kind.eventName, ackID: ackID))
        }
        return .later(update)
    }

    /// `receipt:sync`: receipts on the caller's messages after a cursor, only of rooms its
    /// token allows (the author id is the sender's claim).
    func sync(since: Int64, limit: Int, ackID: Int64?, user: AuthenticatedUser, for socket: ClientSession) throws(RelayError) -> HandlerResult {
        guard let store = services.store else { throw RelayError(.storeUnavailable, "receipts are not enabled on this relay") }
        let page = store.sync(authorID: user.userID, since: since, limit: limit, on: socket.eventLoop).map { receipts -> SocketUpdate in
            guard let ackID else { return SocketUpdate() }
            let next = receipts.last?.id ?? since
            // `next` moves past the receipts left out; `more` says whether to go on.
            let visible = receipts.filter { DeliveryGate.admits(user, room: $0.room) }
            let payload = JSONValue.object([
                ("ok", true), ("receipts", .array(visible.map(\.json))), ("next", .int(next)), ("more", .bool(receipts.count == limit)),
            ])
            return SocketUpdate(reply: .ack(id: ackID, payload: payload))
        }.recover { _ in
            SocketUpdate(reply: .failure(RelayError(.storeUnavailable), event: EventPolicyTable.receiptSync.name, ackID: ackID))
        }
        return .later(page)
    }

    /// The store, once `count` receipts of `room` may be written: the store is enabled, the
    /// socket is in the room, and neither the connection's bound nor the user's quota is spent.
    private func admit(count: Int, room: String, user: AuthenticatedUser, for socket: ClientSession) throws(RelayError) -> any ReceiptStore {
        guard let store = services.store else { throw RelayError(.storeUnavailable, "receipts are not enabled on this relay") }
        guard services.membership.isMember(room: room, connection: socket.connectionID) else { throw RelayError(.notInRoom, "join \(room) first") }
        let limits = services.settings
        // Quotas bound the writer's queue: per connection (receipts awaiting commit) and per
        // user across all of their sockets.
        guard pending + count <= limits.maxPendingPerConnection else {
            services.metrics.receipts.quotaRefusals.increment()
            throw RelayError(.rateLimited, "at most \(limits.maxPendingPerConnection) receipts awaiting commit per connection")
        }
        let now = services.clock.monotonicMs()
        guard services.quota.withLockedValue({ $0.record(user.userID, cost: Double(count), now: now) }) else {
            services.metrics.receipts.quotaRefusals.increment()
            throw RelayError(.rateLimited, "receipt quota of \(Int(limits.perUser.perSecond))/s per user spent")
        }
        return store
    }
}
