import NIOCore
import RelayCore
import RelayStore

/// One socket's delivery receipts (`message:delivered` / `message:read`, their batches,
/// `receipt:sync`): stored, acked once committed — through the socket's one reply path, the
/// acks of one committed batch leaving in one write — then forwarded.
///
/// Bounds the store's queue per connection: at most `receipts.maxPendingPerConnection` receipts
/// awaiting their commit (the per-user quota across a user's sockets is the relay's).
/// Confined to the socket's loop, like the socket.
final class SocketReceipts {
    /// Receipts of this socket handed to the store and not yet committed (or failed).
    private(set) var pending = 0

    /// `message:delivered` / `message:read`: stored, acked after commit, then forwarded.
    func record(_ receipt: NewReceipt, ackID: Int64?, user: AuthenticatedUser, for socket: SocketSession) throws(RelayError) {
        let store = try admit(count: 1, room: receipt.room, user: user, for: socket)
        pending += 1
        let bound = NIOLoopBound((self, socket), eventLoop: socket.eventLoop)
        let event = receipt.kind.eventName
        store.record(receipt, on: socket.eventLoop).whenComplete { result in
            let (me, socket) = bound.value
            me.pending -= 1
            switch result {
            case .success(let recorded):
                if let ackID { socket.reply(.ack(id: ackID, payload: .object([("ok", true), ("id", .int(recorded.receipt.id))])), flush: .soon) }
                // Forwarded once, when first stored; a repeat only gets its ack.
                if recorded.isNew { socket.hub.forward(recorded.receipt, excludeConnection: socket.connectionID) }
            case .failure:
                socket.reply(.failure(RelayError(.storeUnavailable), event: event, ackID: ackID))
            }
        }
    }

    /// A batch (`items`): the same checks and quotas per receipt, handed to the store together
    /// (one group commit), one ack listing each receipt's id, then the new ones forwarded grouped:
    /// one event to the room, one to each author's other devices.
    func record(
        batch receipts: [NewReceipt], room: String, kind: ReceiptKind, ackID: Int64?, user: AuthenticatedUser, for socket: SocketSession
    ) throws(RelayError) {
        let store = try admit(count: receipts.count, room: room, user: user, for: socket)
        pending += receipts.count
        let bound = NIOLoopBound((self, socket), eventLoop: socket.eventLoop)
        store.recordAll(receipts, on: socket.eventLoop).whenComplete { result in
            let (me, socket) = bound.value
            me.pending -= receipts.count
            switch result {
            case .success(let recorded):
                if let ackID {
                    let ids = recorded.map { JSONValue.object([("messageId", .string($0.receipt.messageID)), ("id", .int($0.receipt.id))]) }
                    socket.reply(.ack(id: ackID, payload: .object([("ok", true), ("items", .array(ids))])), flush: .soon)
                }
                let new = recorded.filter(\.isNew).map(\.receipt)
                if !new.isEmpty { socket.hub.publisher.publishReceipts(new, room: room, kind: kind, from: user.userID, excludeConnection: socket.connectionID) }
            case .failure:
                socket.reply(.failure(RelayError(.storeUnavailable), event: kind.eventName, ackID: ackID))
            }
        }
    }

    /// `receipt:sync`: receipts on the caller's messages after a cursor, only of rooms its
    /// token allows (the author id is the sender's claim).
    func sync(since: Int64, limit: Int, ackID: Int64?, user: AuthenticatedUser, for socket: SocketSession) throws(RelayError) {
        guard let store = socket.relay.receipts else { throw RelayError(.storeUnavailable, "receipts are not enabled on this relay") }
        let bound = NIOLoopBound(socket, eventLoop: socket.eventLoop)
        store.sync(authorID: user.userID, since: since, limit: limit, on: socket.eventLoop).whenComplete { result in
            let socket = bound.value
            switch result {
            case .success(let receipts):
                guard let ackID else { return }
                let next = receipts.last?.id ?? since
                // `next` moves past the receipts left out; `more` says whether to go on.
                let visible = receipts.filter { DeliveryGate.admits(user, room: $0.room) }
                let payload = JSONValue.object([
                    ("ok", true), ("receipts", .array(visible.map(\.json))), ("next", .int(next)), ("more", .bool(receipts.count == limit)),
                ])
                socket.reply(.ack(id: ackID, payload: payload))
            case .failure:
                socket.reply(.failure(RelayError(.storeUnavailable), event: EventPolicyTable.receiptSync.name, ackID: ackID))
            }
        }
    }

    /// The store, once `count` receipts of `room` may be written: the store is enabled, the
    /// socket is in the room, and neither the connection's bound nor the user's quota is spent.
    private func admit(count: Int, room: String, user: AuthenticatedUser, for socket: SocketSession) throws(RelayError) -> any ReceiptStore {
        guard let store = socket.relay.receipts else { throw RelayError(.storeUnavailable, "receipts are not enabled on this relay") }
        guard socket.hub.rooms.isMember(room: room, connection: socket.connectionID) else { throw RelayError(.notInRoom, "join \(room) first") }
        let configuration = socket.configuration
        // Quotas bound the writer's queue: per connection (receipts awaiting commit) and per
        // user across all of their sockets.
        guard pending + count <= configuration.receipts.maxPendingPerConnection else {
            socket.hub.metrics.receipts.quotaRefusals.increment()
            throw RelayError(.rateLimited, "at most \(configuration.receipts.maxPendingPerConnection) receipts awaiting commit per connection")
        }
        let now = socket.hub.clock.monotonicMs()
        guard socket.relay.receiptQuota.withLockedValue({ $0.record(user.userID, cost: Double(count), now: now) }) else {
            socket.hub.metrics.receipts.quotaRefusals.increment()
            throw RelayError(.rateLimited, "receipt quota of \(Int(configuration.receipts.perUser.perSecond))/s per user spent")
        }
        return store
    }
}
