import Logging
import NIOCore
import RelayCore

/// CONNECT after the token was verified: recover a dropped session (Socket.IO connection state
/// recovery) or start a new one, with the rooms named in the CONNECT; keep a dropped session
/// for recovery; answer `room:sync`.
///
/// While the rooms are joined and the missed events read, the hub's deliveries to this socket
/// are held (`holding`); the CONNECT answer goes first, then the missed events in order, then
/// the held ones that are newer.
extension SocketSession {
    /// The most a recovery replays; a socket that missed more is not recovered.
    static let maxReplayBytes = 4 << 20
    /// The most one `room:sync` page carries.
    static let maxSyncPageBytes = 256 << 10
    private enum Missed {
        case events([StreamKey: [(offset: StreamOffset, message: OutboundMessage)]])
        case notRecovered(RecoveryResult)
    }

    /// The token is valid: recover the session the client names, or start a new one.
    func connect(_ user: AuthenticatedUser, request: ConnectRequest) {
        takesOffsets = hub.broker.keepsHistory && (configuration.offsetsForEverySocket || request.wantsRecovery)
        guard takesOffsets, let pid = request.pid else { return connectFresh(user, request: request, recovery: nil) }
        let handler = NIOLoopBound(self, eventLoop: eventLoop)
        // Not kept: the old connection may still look alive (its drop not noticed yet); its
        // node hands the session over (`Hub.takeKeptSession`).
        hub.takeKeptSession(pid: pid, user: user.userID, on: eventLoop).whenComplete { result in
            let me = handler.value
            guard me.session.phase == .authenticating, !me.closing else { return }
            switch result {
            case .success(.taken(let record)): me.recover(record, user: user, request: request)
            case .success(.notFound): me.connectFresh(user, request: request, recovery: .unknownSession)
            case .success(.otherUser): me.connectFresh(user, request: request, recovery: .userMismatch)
            case .failure: me.connectFresh(user, request: request, recovery: .unavailable)
            }
        }
    }

    // MARK: A new session

    /// A new session: register, join the CONNECT's rooms, answer with their offsets.
    func connectFresh(_ user: AuthenticatedUser, request: ConnectRequest, recovery: RecoveryResult?) {
        guard let shard else { return }
        if let recovery { hub.metrics.recovery(recovery) }
        let plain = request.rooms.isEmpty && !takesOffsets
        if !plain { startHolding() }
        guard register(user, sid: sid) else { return }
        if takesOffsets {
            let pid = SessionID.makeSecret()
            self.pid = pid
            hub.track(pid: pid, connection: connectionID, on: shard)
        }
        var joined: [String] = []
        var refused: [(room: String, code: String)] = []
        for room in request.rooms {
            guard user.rooms.allows(room) else {
                refused.append((room, RelayErrorCode.roomNotAuthorized.rawValue))
                continue
            }
            do throws(RelayError) {
                _ = try hub.join(room: room, sink: self, user: user.userID, on: shard)
                joined.append(room)
            } catch {
                refused.append((room, error.code.rawValue))
            }
        }
        let now = hub.clock.monotonicMs()
        if plain {
            perform(session.connectFinished(.success(ConnectAnswer(user: user)), now: now, wallMs: hub.clock.wallMs()))
            logConnect(user, recovered: false)
            return
        }
        var streams = joined.map { StreamKey.room($0) }
        if takesOffsets { streams.append(.user(user.userID)) }
        // Heads are read once this node receives the streams, so the offsets in the answer and
        // the live events that follow them meet exactly.
        let loop = eventLoop
        let broker = hub.broker
        let subscribed = EventLoopFuture.andAllComplete(streams.map { broker.whenSubscribed($0, on: loop) }, on: loop)
        let heads = streams.map { stream in subscribed.flatMap { broker.head(of: stream, on: loop) }.map { (stream, $0) } }
        let (joinedRooms, refusedRooms) = (joined, refused)
        let handler = NIOLoopBound(self, eventLoop: eventLoop)
        EventLoopFuture.whenAllSucceed(heads, on: eventLoop).whenSuccess { heads in
            let me = handler.value
            guard me.session.phase == .authenticating, !me.closing else { return }
            let positions = Dictionary(heads, uniquingKeysWith: { a, _ in a })
            if me.takesOffsets {
                for (stream, head) in heads { me.recoveryLog.follow(stream, from: head) }
            }
            let rooms = joinedRooms.map { ($0, WireOffset(positions[.room($0)] ?? .zero, stream: .room($0)).description) }
            let answer = ConnectAnswer(user: user, pid: me.pid, recovered: false, rooms: rooms, refused: refusedRooms)
            me.connectedAtMs = me.hub.clock.monotonicMs()
            me.perform(me.session.connectFinished(.success(answer), now: me.hub.clock.monotonicMs(), wallMs: me.hub.clock.wallMs()))
            me.release(after: positions)
            me.logConnect(user, recovered: false)
        }
    }

    // MARK: Recovery

    /// The client came back with the `pid` of a kept session: same user, and every stream's
    /// history reaching back to where the socket was, or it is a new session.
    private func recover(_ record: SessionRecord, user: AuthenticatedUser, request: ConnectRequest) {
        guard record.userID == user.userID else { return connectFresh(user, request: request, recovery: .userMismatch) }
        guard !request.offsetIsInvalid else { return connectFresh(user, request: request, recovery: .invalidOffset) }
        guard let cuts = record.log.cuts(lastReceived: request.offset), let userCut = cuts[.user(user.userID)] else {
            return connectFresh(user, request: request, recovery: .historyGone)
        }
        // Rooms are re-checked against the new token.
        let rooms = record.rooms.filter { user.rooms.allows($0) && cuts[.room($0)] != nil }
        var wanted: [StreamKey: StreamOffset] = [.user(user.userID): userCut]
        for room in rooms { wanted[.room(room)] = cuts[.room(room)] }
        let streams = wanted
        let handler = NIOLoopBound(self, eventLoop: eventLoop)
        readMissed(after: wanted).whenSuccess { first in
            let me = handler.value
            guard me.session.phase == .authenticating, !me.closing else { return }
            guard case .events(let before) = first else {
                if case .notRecovered(let why) = first { return me.connectFresh(user, request: request, recovery: why) }
                return
            }
            me.resume(record, user: user, rooms: rooms, cuts: streams, before: before)
        }
    }

    /// Registers under the old `sid`, rejoins the rooms, reads what came since the first read,
    /// then answers and replays.
    private func resume(
        _ record: SessionRecord, user: AuthenticatedUser, rooms: [String], cuts: [StreamKey: StreamOffset],
        before: [StreamKey: [(offset: StreamOffset, message: OutboundMessage)]]
    ) {
        guard let shard else { return }
        startHolding()
        guard register(user, sid: record.socketSID) else { return }
        pid = record.pid
        hub.track(pid: record.pid, connection: connectionID, on: shard)
        recoveryLog = RecoveryLog()
        recoveryLog.follow(.user(user.userID), from: cuts[.user(user.userID)] ?? .zero)
        var restored: [String] = []
        for room in rooms {
            do throws(RelayError) {
                _ = try hub.join(room: room, sink: self, user: user.userID, on: shard)
                restored.append(room)
                recoveryLog.follow(.room(room), from: cuts[.room(room)] ?? .zero)
            } catch {
                relay.logger.info("recovered socket could not rejoin", metadata: ["room": "\(room)", "code": "\(error.code.rawValue)"])
            }
        }
        // What the first read reached; the second read continues from there.
        var reached: [StreamKey: StreamOffset] = [.user(user.userID): cuts[.user(user.userID)] ?? .zero]
        for room in restored { reached[.room(room)] = cuts[.room(room)] ?? .zero }
        for (stream, entries) in before where reached[stream] != nil {
            if let last = entries.last { reached[stream] = last.offset }
        }
        let (firstReached, restoredRooms) = (reached, restored)
        let handler = NIOLoopBound(self, eventLoop: eventLoop)
        // The second read starts once this node receives every stream: an event is then either
        // in the read or delivered live (or both: the socket drops the second copy).
        let loop = eventLoop
        let broker = hub.broker
        EventLoopFuture.andAllSucceed(firstReached.keys.map { broker.whenSubscribed($0, on: loop) }, on: loop).flatMap {
            handler.value.readMissed(after: firstReached)
        }.whenComplete { result in
            let second: Missed
            switch result {
            case .success(let missed): second = missed
            case .failure: second = .notRecovered(.unavailable)
            }
            let me = handler.value
            guard me.session.phase == .authenticating, !me.closing else { return }
            guard case .events(let later) = second else {
                // Trimmed between the two reads: never a partial recovery. The client reconnects
                // and, its session taken, starts a new one.
                me.hub.metrics.recovery(.historyGone)
                me.close(code: CloseCode.goingAway, reason: "recovery failed; reconnect")
                return
            }
            var missed: [(position: StreamPosition, message: OutboundMessage)] = []
            var last = firstReached
            for stream in firstReached.keys {
                // The socket's own broadcasts were never sent to it.
                // …and a receipt on a user stream reached it through the room when it was a member.
                for entry in (before[stream] ?? []) + (later[stream] ?? [])
                where entry.message.origin != record.socketSID && !(entry.message.skipMembersOf.map(restoredRooms.contains) ?? false) {
                    missed.append((StreamPosition(stream: stream, offset: entry.offset), entry.message))
                }
                if let newest = later[stream]?.last?.offset { last[stream] = newest }
            }
            // One order across streams: by offset time, then stream, so each stream stays in order.
            missed.sort { ($0.position.offset, $0.position.stream.name) < ($1.position.offset, $1.position.stream.name) }
            let roomOffsets = restoredRooms.map { ($0, WireOffset(last[.room($0)] ?? .zero, stream: .room($0)).description) }
            let answer = ConnectAnswer(user: user, socketSID: record.socketSID, pid: record.pid, recovered: true, rooms: roomOffsets)
            me.connectedAtMs = me.hub.clock.monotonicMs()
            me.perform(me.session.connectFinished(.success(answer), now: me.hub.clock.monotonicMs(), wallMs: me.hub.clock.wallMs()))
            for (position, message) in missed {
                var message = message
                message.stamp = RecoveryStamp(position: position)
                message.compressed = nil
                me.write(message)
            }
            me.release(after: last)
            me.hub.metrics.recovery(.recovered)
            me.relay.logger.info("recovered", metadata: ["sid": "\(me.sid)", "user": "\(user.userID)", "replayed": "\(missed.count)"])
        }
    }

    /// Reads every stream's events after its offset; not recovered when one does not reach
    /// back, the store is down, or the socket missed more than `maxReplayBytes`.
    private func readMissed(after offsets: [StreamKey: StreamOffset]) -> EventLoopFuture<Missed> {
        let limit = max(1, configuration.historyLimits.maxEvents * 2)
        let reads = offsets.map { stream, offset in
            hub.broker.history(of: stream, after: offset, limit: limit, maxBytes: Self.maxReplayBytes, on: eventLoop).map { (stream, $0) }
        }
        return EventLoopFuture.whenAllSucceed(reads, on: eventLoop).map { results -> Missed in
            var out: [StreamKey: [(offset: StreamOffset, message: OutboundMessage)]] = [:]
            var bytes = 0
            for (stream, result) in results {
                switch result {
                case .failure(.storeDown): return .notRecovered(.unavailable)
                case .failure(.unavailable): return .notRecovered(.historyGone)
                case .success(let page):
                    if page.more { return .notRecovered(.historyGone) }
                    out[stream] = page.entries.map { (offset: $0.offset, message: $0.item) }
                    bytes += page.entries.reduce(0) { $0 + $1.item.byteCount }
                }
            }
            return bytes > Self.maxReplayBytes ? .notRecovered(.historyGone) : .events(out)
        }
    }

    /// Writes what was held during CONNECT, skipping what the socket has already had (offsets at
    /// or before `positions`), and stops holding.
    private func release(after positions: [StreamKey: StreamOffset]) {
        var held = holding
        holding = nil
        while let message = held?.dequeue() {
            if let position = message.stamp?.position, let reached = positions[position.stream], position.offset <= reached { continue }
            write(message)
        }
        flushOutbound()
    }

    private func logConnect(_ user: AuthenticatedUser, recovered: Bool) {
        relay.logger.info("connect", metadata: ["sid": "\(sid)", "user": "\(user.userID)", "ip": "\(handshake.remoteIP)"])
    }

    /// The socket joined a room (`room:join`) whose stream stood at `head` once read.
    func follow(_ stream: StreamKey, from head: StreamOffset) {
        if takesOffsets { recoveryLog.join(stream, at: head) }
    }

    // MARK: Dropped

    /// Keeps a dropped session of a socket that takes offsets for the recovery window.
    func keepForRecovery(user: AuthenticatedUser, end: ConnectionEnd) {
        guard takesOffsets, let pid, hub.broker.keepsHistory, end.keepsSessionForRecovery, !session.clientDisconnected else { return }
        let rooms = recoveryLog.streams.compactMap { stream -> String? in
            if case .room(let room) = stream { return room }
            return nil
        }.sorted()
        let record = SessionRecord(pid: pid, socketSID: sid, userID: user.userID, rooms: rooms, log: recoveryLog, disconnectedAtMs: hub.clock.wallMs())
        hub.sessions.put(record, windowMs: configuration.recoveryWindowMs)
    }

    // MARK: room:sync

    /// Answers `room:sync`: the room's events after `offset`, paged.
    func syncRoom(_ room: String, after offset: WireOffset, limit: Int, ackID: Int64?) {
        guard let ackID else { return }
        let handler = NIOLoopBound(self, eventLoop: eventLoop)
        hub.broker.history(of: .room(room), after: offset.offset, limit: limit, maxBytes: Self.maxSyncPageBytes, on: eventLoop).whenComplete { result in
            let me = handler.value
            guard case .success(.success(let page)) = result else {
                me.hub.metrics.roomSyncs["history_unavailable"]?.increment()
                me.reply(.failure(RelayError(.historyUnavailable), event: "room:sync", ackID: ackID))
                return
            }
            me.hub.metrics.roomSyncs["ok"]?.increment()
            var events: [JSONValue] = []
            var attachments: [[UInt8]] = []
            for entry in page.entries {
                guard var event = Self.eventArray(entry.item) else { continue }
                if !entry.item.attachments.isEmpty {
                    event = Self.renumberPlaceholders(event, by: attachments.count)
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
            me.reply(attachments.isEmpty ? .ack(id: ackID, payload: payload) : .binaryAck(id: ackID, payload: payload, attachments: attachments))
        }
    }

    /// `["name", payload…]` of a stored `42[…]` or `45<n>-[…]` packet.
    static func eventArray(_ message: OutboundMessage) -> JSONValue? {
        let view = message.bytes.readableBytesView
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
