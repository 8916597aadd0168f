import NIOCore
import RelayBackends
import RelayCore

/// `room:sync`: a room's recoverable events after an offset, paged, for every client (those
/// that do not recover sessions catch up this way).
struct RoomSync {
    let services: EventServices
    /// The socket's loop, where the answer completes.
    let loop: any EventLoop

    /// The most one page carries.
    static let maxPageBytes = 256 << 10

    /// The room's events after `offset`, at most `limit`, as the ack.
    func sync(_ room: String, after offset: WireOffset, limit: Int, ackID: Int64?) -> HandlerResult {
        guard let ackID else { return .nothing }
        let metrics = services.metrics
        let page = services.broker.history(of: .room(room), after: offset.offset, limit: limit, maxBytes: Self.maxPageBytes, on: loop).map { result in
            guard case .success(let page) = result else {
                metrics.events.roomSyncs["history_unavailable"]?.increment()
                return SocketUpdate(reply: .failure(RelayError(.historyUnavailable), event: EventPolicyTable.roomSync.name, ackID: ackID))
            }
            metrics.events.roomSyncs["ok"]?.increment()
            return SocketUpdate(reply: Self.page(page, of: room, after: offset, ackID: ackID))
        }.recover { _ in
            metrics.events.roomSyncs["history_unavailable"]?.increment()
            return SocketUpdate(reply: .failure(RelayError(.historyUnavailable), event: EventPolicyTable.roomSync.name, ackID: ackID))
        }
        return .later(page)
    }

    /// The ack for one page: a binary ack when an event carries attachments.
    static func page(_ page: HistoryPage<Publication>, of room: String, after offset: WireOffset, ackID: Int64) -> EngineSession.Reply {
        var events: [JSONValue] = []
        var attachments: [[UInt8]] = []
        for entry in page.entries {
            guard var event = eventArray(entry.item) else { continue }
            if !entry.item.attachments.isEmpty {
                event = renumberPlaceholders(event, by: attachments.count)
                attachments += entry.item.attachments.map { Array($0.readableBytesView) }
            }
            guard case .array(var items) = event else { continue }
            items.append(.string(WireOffset(entry.offset, stream: .room(room)).description))
            events.append(.array(items))
        }
        let last = page.entries.last.map { WireOffset($0.offset, stream: .room(room)) } ?? offset
        let payload = JSONValue.object([
            ("ok", true), ("room", .string(room)), ("events", .array(events)), ("offset", .string(last.description)), ("more", .bool(page.more)),
        ])
        return attachments.isEmpty ? .ack(id: ackID, payload: payload) : .binaryAck(id: ackID, payload: payload, attachments: attachments)
    }

    /// `["name", payload…]` of a stored `42[…]` or `45<n>-[…]` packet.
    static func eventArray(_ publication: Publication) -> JSONValue? {
        let view = publication.packet.readableBytesView
        guard let open = view.firstIndex(of: UInt8(ascii: "[")) else { return nil }
        return try? JSONParser.parse(Array(view[open...]))
    }

    /// Shifts every placeholder's `num` by `base` (attachments of several events in one ack).
    static func renumberPlaceholders(_ value: JSONValue, by base: Int) -> JSONValue {
        if let n = BinaryPlaceholder.number(of: value) { return BinaryPlaceholder.json(Int(n) + base) }
        switch value {
        case .array(let items): return .array(items.map { renumberPlaceholders($0, by: base) })
        case .object(let pairs): return .object(pairs.map { ($0.0, renumberPlaceholders($0.1, by: base)) })
        default: return value
        }
    }
}
