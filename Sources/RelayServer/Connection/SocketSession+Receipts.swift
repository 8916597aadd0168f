import NIOCore
import RelayCore
import RelayStore

extension SocketSession {
    /// `message:delivered` / `message:read`: stored, acked after commit, then forwarded.
    func record(_ receipt: NewReceipt, ackID: Int64?, user: AuthenticatedUser) throws(RelayError) {
        guard let store = relay.receipts else { throw RelayError(.storeUnavailable, "receipts are not enabled on this relay") }
        guard hub.isMember(room: receipt.room, connection: connectionID) else { throw RelayError(.notInRoom, "join \(receipt.room) first") }
        // Quotas bound the writer's queue: per connection (receipts awaiting commit) and per
        // user across all of their sockets.
        guard pendingReceipts < configuration.maxPendingReceiptsPerConnection else {
            hub.metrics.receiptQuotaRefusals.increment()
            throw RelayError(.rateLimited, "at most \(configuration.maxPendingReceiptsPerConnection) receipts awaiting commit per connection")
        }
        let now = hub.clock.monotonicMs()
        guard relay.receiptQuota.withLockedValue({ $0.record(user.userID, now: now) }) else {
            hub.metrics.receiptQuotaRefusals.increment()
            throw RelayError(.rateLimited, "receipt quota of \(Int(configuration.receiptsPerUser.perSecond))/s per user spent")
        }
        pendingReceipts += 1
        let loop = NIOLoopBound(self, eventLoop: eventLoop)
        let event = receipt.kind.eventName
        store.record(receipt, on: eventLoop).whenComplete { result in
            loop.value.receiptRecorded(result, ackID: ackID, event: event)
        }
    }

    /// A batch (`items`): the same checks and quotas per receipt, handed to the store together
    /// (one group commit), one ack listing each receipt's id, then the new ones forwarded grouped:
    /// one event to the room, one to each author's other devices.
    func record(batch receipts: [NewReceipt], room: String, kind: ReceiptKind, ackID: Int64?, user: AuthenticatedUser) throws(RelayError) {
        guard let store = relay.receipts else { throw RelayError(.storeUnavailable, "receipts are not enabled on this relay") }
        guard hub.isMember(room: room, connection: connectionID) else { throw RelayError(.notInRoom, "join \(room) first") }
        guard pendingReceipts + receipts.count <= configuration.maxPendingReceiptsPerConnection else {
            hub.metrics.receiptQuotaRefusals.increment()
            throw RelayError(.rateLimited, "at most \(configuration.maxPendingReceiptsPerConnection) receipts awaiting commit per connection")
        }
        let now = hub.clock.monotonicMs()
        guard relay.receiptQuota.withLockedValue({ $0.record(user.userID, cost: Double(receipts.count), now: now) }) else {
            hub.metrics.receiptQuotaRefusals.increment()
            throw RelayError(.rateLimited, "receipt quota of \(Int(configuration.receiptsPerUser.perSecond))/s per user spent")
        }
        pendingReceipts += receipts.count
        let loop = NIOLoopBound(self, eventLoop: eventLoop)
        store.recordAll(receipts, on: eventLoop).whenComplete { result in
            let handler = loop.value
            handler.pendingReceipts -= receipts.count
            switch result {
            case .success(let recorded):
                if let ackID {
                    let ids = recorded.map { JSONValue.object([("messageId", .string($0.receipt.messageID)), ("id", .int($0.receipt.id))]) }
                    handler.reply(.ack(id: ackID, payload: .object([("ok", true), ("items", .array(ids))])), flush: .soon)
                }
                let new = recorded.filter(\.isNew).map(\.receipt)
                if !new.isEmpty { handler.hub.publishReceipts(new, room: room, kind: kind, from: user.userID, excludeConnection: handler.connectionID) }
            case .failure:
                handler.reply(.failure(RelayError(.storeUnavailable), event: kind.eventName, ackID: ackID))
            }
        }
    }

    /// `receipt:sync`: receipts on the caller's messages after a cursor, only of rooms its
    /// token allows (the author id is the sender's claim).
    func sync(since: Int64, limit: Int, ackID: Int64?, user: AuthenticatedUser) throws(RelayError) {
        guard let store = relay.receipts else { throw RelayError(.storeUnavailable, "receipts are not enabled on this relay") }
        let loop = NIOLoopBound(self, eventLoop: eventLoop)
        store.sync(authorID: user.userID, since: since, limit: limit, on: eventLoop).whenComplete { result in
            let handler = loop.value
            switch result {
            case .success(let receipts):
                guard let ackID else { return }
                let next = receipts.last?.id ?? since
                // `next` moves past the receipts left out; `more` says whether to go on.
                let visible = receipts.filter { user.rooms.allows($0.room) }
                let payload = JSONValue.object([
                    ("ok", true), ("receipts", .array(visible.map(\.json))), ("next", .int(next)), ("more", .bool(receipts.count == limit)),
                ])
                handler.reply(.ack(id: ackID, payload: payload))
            case .failure:
                handler.reply(.failure(RelayError(.storeUnavailable), event: "receipt:sync", ackID: ackID))
            }
        }
    }

    /// Runs on the connection's loop once the receipt's transaction committed (or failed).
    private func receiptRecorded(_ result: Result<RecordedReceipt, Error>, ackID: Int64?, event: String) {
        pendingReceipts -= 1
        switch result {
        case .success(let recorded):
            // Acks completed together (one committed batch) leave in one write.
            if let ackID { reply(.ack(id: ackID, payload: .object([("ok", true), ("id", .int(recorded.receipt.id))])), flush: .soon) }
            // Forwarded once, when first stored; a repeat only gets its ack.
            if recorded.isNew {
                hub.publishReceipt(recorded.receipt, excludeConnection: connectionID)
            }
        case .failure:
            reply(.failure(RelayError(.storeUnavailable), event: event, ackID: ackID))
        }
    }
}
