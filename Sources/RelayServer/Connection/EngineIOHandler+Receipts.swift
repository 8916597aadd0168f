import NIOCore
import RelayCore
import RelayStore

extension EngineIOHandler {
    static let maxSyncPage = 1000
    static let defaultSyncPage = 100

    /// `message:delivered` / `message:read` (stored, acked after commit, then forwarded) and
    /// `receipt:sync`. Returns `nil`: the ack is sent when the store answers.
    func handleReceiptEvent(_ event: InboundEvent, user: AuthenticatedUser) throws(RelayError) -> JSONValue? {
        guard let store = relay.receipts, let context else { throw RelayError(.storeUnavailable, "receipts are not enabled on this relay") }
        let loop = NIOLoopBound(self, eventLoop: context.eventLoop)
        if let kind = ReceiptKind(eventName: event.name) {
            let receipt = try NewReceipt(payload: event.payload, userID: user.userID, kind: kind, ts: hub.clock.wallMs())
            guard hub.isMember(room: receipt.room, connection: connectionID) else { throw RelayError(.notInRoom, "join \(receipt.room) first") }
            // Quotas bound the writer's queue: per connection (receipts awaiting commit) and
            // per user across all of their sockets.
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
            let ackID = event.ackID
            store.record(receipt, on: context.eventLoop).whenComplete { result in
                loop.value.receiptRecorded(result, ackID: ackID, event: event.name)
            }
            return nil
        }
        // receipt:sync
        var since: Int64 = 0
        if let value = event.payload["since"], value != .null {
            guard let s = value.intValue, s >= 0 else { throw RelayError(.invalidPayload, "since must be a non-negative integer cursor") }
            since = s
        }
        var limit = Self.defaultSyncPage
        if let value = event.payload["limit"], value != .null {
            guard let l = value.intValue, l >= 1, l <= Int64(Self.maxSyncPage) else {
                throw RelayError(.invalidPayload, "limit must be an integer in 1...\(Self.maxSyncPage)")
            }
            limit = Int(l)
        }
        let ackID = event.ackID
        let cursor = since
        let pageSize = limit
        store.sync(authorID: user.userID, since: cursor, limit: limit, on: context.eventLoop).whenComplete { result in
            let handler = loop.value
            switch result {
            case .success(let receipts):
                guard let ackID else { return }
                let next = receipts.last?.id ?? cursor
                // Only receipts of rooms this token allows: the author id is the sender's claim.
                // `next` still moves past the ones left out, and `more` says whether to go on.
                let visible = receipts.filter { user.rooms.allows($0.room) }
                let payload = JSONValue.object([
                    ("ok", true), ("receipts", .array(visible.map(\.json))), ("next", .int(next)), ("more", .bool(receipts.count == pageSize)),
                ])
                handler.sendText(SocketPacket.ackMessage(id: ackID, payload: payload))
                handler.flushOutbound()
            case .failure:
                handler.sendError(RelayError(.storeUnavailable), event: event.name, ackID: ackID)
            }
        }
        return nil
    }

    /// Runs on the connection's loop once the receipt's transaction committed (or failed).
    private func receiptRecorded(_ result: Result<RecordedReceipt, Error>, ackID: Int64?, event: String) {
        pendingReceipts -= 1
        switch result {
        case .success(let recorded):
            if let ackID, !closing {
                sendText(SocketPacket.ackMessage(id: ackID, payload: .object([("ok", true), ("id", .int(recorded.receipt.id))])))
                flushSoon()
            }
            // Forwarded once, when first stored; a repeat only gets its ack.
            if recorded.isNew {
                hub.publishReceipt(recorded.receipt, excludeConnection: connectionID)
            }
        case .failure:
            sendError(RelayError(.storeUnavailable), event: event, ackID: ackID)
        }
    }
}
