import RelayBackends
import RelayCore

/// Committed receipts: to the room, and to the devices of each message's author outside the
/// room (and allowed it), each socket once (`ReceiptAudience.room`); or to the authors' devices
/// and the reader's other devices only (`.devices`).
extension Publisher {
    /// Forwards a committed receipt to its room and to the devices of the message's author
    /// whose token allows the room, the author's devices outside the room included (each
    /// socket gets it once): one publish to the room's stream, one to the author's. The author
    /// id is the sender's claim: a device that may not see the room never gets it.
    func publishReceipt(_ receipt: Receipt, audience: ReceiptAudience = .room, excludeConnection: ConnectionID?) {
        if audience == .devices {
            let payload = receipt.json.setting("from", to: .string(receipt.userID))
            return publishToDevices(receipt.kind.policy, room: receipt.room, users: [receipt.authorID, receipt.userID], excludeConnection: excludeConnection) { _ in
                payload
            }
        }
        let event = receipt.kind.policy
        let room = roomAudience(receipt.room, excludeConnection: excludeConnection, origin: nil)
        let author = userAudience(receipt.authorID)
        let recoverable = broker.keepsHistory
        // Nobody else in the room and the author offline (and no history, no other node).
        if author.recipients == 0 && room.recipients == 0 && !recoverable && !broker.crossesNodes { return }
        let payload = receipt.json.setting("from", to: .string(receipt.userID))
        var encoded = makeMessage(event, payload, deflateClients: room.clients.deflate)
        encoded.origin = room.origin
        let roomMessage = encoded
        broker.publish(roomMessage.publication, to: .room(receipt.room), routing: Routing(), recoverable: recoverable) { [self] offset in
            let stamped = withOffsetVariant(roomMessage.at(.room(receipt.room), offset), clients: room.clients)
            let partitions = offset == nil ? room.partitions : rooms.partitions(room: receipt.room)
            deliver(room: receipt.room, message: stamped, partitions: partitions, excludeConnection: excludeConnection, excludeUser: nil)
        }
        encoded.skipMembersOf = receipt.room
        let authorMessage = encoded
        broker.publish(authorMessage.publication, to: .user(receipt.authorID), routing: Routing(skipMembersOf: receipt.room), recoverable: recoverable) { [self] offset in
            let stamped = withOffsetVariant(authorMessage.at(.user(receipt.authorID), offset), clients: author.clients)
            let partitions = offset == nil ? author.partitions : registry.connections(of: receipt.authorID).partitions
            deliver(user: receipt.authorID, stamped, partitions: partitions, skipMembersOf: receipt.room, excludeConnection: excludeConnection)
        }
    }

    /// Forwards committed receipts of one batch (or of one coalescing window), grouped: one
    /// `{room, from, kind, items}` event to the room, and to each author's devices outside the
    /// room (and allowed it) the items of that author's messages. `from`: the reader, `nil` when
    /// the items have several (each item names its own, `userId`).
    func publishReceipts(
        _ receipts: [Receipt], room: String, kind: ReceiptKind, from user: String?, audience: ReceiptAudience = .room, excludeConnection: ConnectionID?
    ) {
        let byAuthor = Dictionary(grouping: receipts, by: \.authorID)
        func payload(_ items: [Receipt]) -> JSONValue {
            let from: [(String, JSONValue)] = user.map { [("from", .string($0))] } ?? []
            return .object([("room", .string(room))] + from + [("kind", .string(kind.rawValue)), ("items", .array(items.map(\.json)))])
        }
        if audience == .devices {
            // Each author gets the items of its messages, each reader the items it sent.
            let users = Set(receipts.flatMap { [$0.authorID, $0.userID] })
            return publishToDevices(kind.policy, room: room, users: users, excludeConnection: excludeConnection) { u in
                payload(receipts.filter { $0.authorID == u || $0.userID == u })
            }
        }
        // Every member counts here (the excluded sender included); its sid is still the origin.
        let roomAudience = roomAudience(room, excludeConnection: nil, origin: excludeConnection.flatMap(registry.sid(of:)))
        let authors = byAuthor.keys.map { author in (author, registry.connections(of: author).partitions) }
        let event = kind.policy
        let recoverable = broker.keepsHistory
        var encoded = makeMessage(event, payload(receipts), deflateClients: roomAudience.clients.deflate)
        encoded.origin = roomAudience.origin
        let roomMessage = encoded
        broker.publish(roomMessage.publication, to: .room(room), routing: Routing(), recoverable: recoverable) { [self] offset in
            let stamped = withOffsetVariant(roomMessage.at(.room(room), offset), clients: roomAudience.clients)
            let partitions = offset == nil ? roomAudience.partitions : rooms.partitions(room: room)
            deliver(room: room, message: stamped, partitions: partitions, excludeConnection: excludeConnection, excludeUser: nil)
        }
        for (author, partitions) in authors {
            var forAuthor = makeMessage(event, payload(byAuthor[author] ?? []), deflateClients: roomAudience.clients.deflate)
            forAuthor.origin = roomAudience.origin
            forAuthor.skipMembersOf = room
            let authorMessage = forAuthor
            broker.publish(authorMessage.publication, to: .user(author), routing: Routing(skipMembersOf: room), recoverable: recoverable) { [self] offset in
                let stamped = withOffsetVariant(authorMessage.at(.user(author), offset), clients: roomAudience.clients)
                let loops = offset == nil ? partitions : registry.connections(of: author).partitions
                deliver(user: author, stamped, partitions: loops, skipMembersOf: room, excludeConnection: excludeConnection)
            }
        }
    }

    /// `ReceiptAudience.devices`: to each of `users`' sockets allowed the room (the authors and
    /// the readers; `payload(user)`: the items that concern that user), but the sending socket;
    /// on their user streams, so every node and a recovering device get it. Each user once.
    private func publishToDevices(
        _ event: EventPolicy, room: String, users: Set<String>, excludeConnection: ConnectionID?, _ payload: (String) -> JSONValue
    ) {
        let recoverable = broker.keepsHistory
        let origin = excludeConnection.flatMap(registry.sid(of:))
        for user in users.sorted() {
            let audience = userAudience(user)
            if audience.recipients == 0 && !recoverable && !broker.crossesNodes { continue }
            var message = makeMessage(event, payload(user), deflateClients: audience.clients.deflate)
            message.origin = origin
            message.allowedIn = room
            let sent = message
            broker.publish(sent.publication, to: .user(user), routing: Routing(allowedIn: room), recoverable: recoverable) { [self] offset in
                let stamped = withOffsetVariant(sent.at(.user(user), offset), clients: audience.clients)
                let partitions = offset == nil ? audience.partitions : registry.connections(of: user).partitions
                deliver(user: user, stamped, partitions: partitions, skipMembersOf: nil, allowedIn: room, excludeConnection: excludeConnection)
            }
        }
    }
}
