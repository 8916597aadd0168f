import Logging
import NIOCore
import RelayBackends
import RelayCore

/// A socket's CONNECT, from its token to the answer: authenticate, then recover a dropped
/// session (Socket.IO connection state recovery) or start a new one, with the rooms named in
/// the CONNECT; and when the socket goes, leave the hub and keep its session for recovery.
///
/// The I/O side of the socket's `ConnectState` (RelayCore), which holds the state and makes the
/// decisions that need none: while the rooms are joined and the missed events read, the hub's
/// deliveries to the socket are held there; the CONNECT answer goes first, then the missed
/// events in order, then the held ones that are newer. Every step runs on the socket's loop; a
/// step that waited (a token, a kept session, a history read) goes on only while the socket is
/// still authenticating. It never changes the socket: each step hands the socket the changes
/// it asks for (`SocketChange`), which the socket carries out in order.
struct ConnectSetup {
    let services: ConnectServices
    let socket: ClientSession

    /// The most a recovery replays; a socket that missed more is not recovered.
    static let maxReplayBytes = 4 << 20

    /// Each stream's events after an offset, or why the socket is not recovered.
    private enum Missed {
        case events([StreamKey: [(offset: StreamOffset, message: OutboundMessage)]])
        case notRecovered(RecoveryResult)
    }

    private var eventLoop: any EventLoop { socket.eventLoop }

    /// Whether a step that waited may go on: the socket is still waiting for its CONNECT answer.
    private var stillAuthenticating: Bool { socket.isAuthenticating }

    /// Hands the socket the changes this step asks for, carried out in order.
    private func change(_ changes: SocketChange...) {
        socket.carryOut(.now(SocketUpdate(changes: changes)), for: socket.connectionID)
    }

    // MARK: Authentication

    /// Verifies the token (after the per-IP failed-authentication budget), then recovers the
    /// session or starts a new one.
    func authenticate(_ request: ConnectRequest) {
        let now = services.clock.monotonicMs()
        guard services.admission.mayAuthenticate(ip: socket.remoteIP, token: request.token, now: now) else {
            services.metrics.connections.authFailure(.authRateLimited)
            services.metrics.connections.connectsRefused.increment()
            change(.refused(RelayError(.authRateLimited)))
            return
        }
        let bound = NIOLoopBound(self, eventLoop: eventLoop)
        services.authenticate(request.token, eventLoop).whenSuccess { result in
            bound.value.authenticationCompleted(result, request: request)
        }
    }

    private func authenticationCompleted(_ result: Result<AuthenticatedUser, RelayError>, request: ConnectRequest) {
        guard stillAuthenticating else { return }
        let now = services.clock.monotonicMs()
        switch result {
        case .failure(let error):
            services.admission.recordAuthFailure(ip: socket.remoteIP, token: request.token, now: now)
            services.metrics.connections.authFailure(error.code)
            services.metrics.connections.connectsRefused.increment()
            services.logger.info("auth failed", metadata: ["ip": "\(socket.remoteIP)", "code": "\(error.code.rawValue)"])
            change(.refused(error))
        case .success(let user):
            guard !services.revocations.isRevoked(user) else {
                services.metrics.connections.authFailure(.tokenRevoked)
                services.metrics.connections.connectsRefused.increment()
                change(.refused(RelayError(.tokenRevoked)))
                return
            }
            connect(user, request: request)
        }
    }

    /// The token is valid: recover the session the client names, or start a new one.
    private func connect(_ user: AuthenticatedUser, request: ConnectRequest) {
        let takesOffsets = services.broker.keepsHistory && (services.recovery.offsetsForEverySocket || request.wantsRecovery)
        change(.connecting(takesOffsets: takesOffsets))
        guard takesOffsets, let pid = request.pid else { return connectFresh(user, request: request, takesOffsets: takesOffsets, recovery: nil) }
        let bound = NIOLoopBound(self, eventLoop: eventLoop)
        // Not kept: the old connection may still look alive (its drop not noticed yet); its
        // node hands the session over (`Hub.takeKeptSession`).
        services.handover.takeKeptSession(pid: pid, user: user.userID, on: eventLoop).whenComplete { result in
            let me = bound.value
            guard me.stillAuthenticating else { return }
            switch result {
            case .success(.taken(let record)): me.recover(record, user: user, request: request)
            case .success(.notFound): me.connectFresh(user, request: request, takesOffsets: true, recovery: .unknownSession)
            case .success(.otherUser): me.connectFresh(user, request: request, takesOffsets: true, recovery: .userMismatch)
            case .failure: me.connectFresh(user, request: request, takesOffsets: true, recovery: .unavailable)
            }
        }
    }

    /// Registers with the hub under `sid`, holding its deliveries when `holding`; `false` (and
    /// the CONNECT refused) when a limit says no.
    private func register(_ user: AuthenticatedUser, sid: String, holding: Bool, takesOffsets: Bool) -> Bool {
        let c = services.outbound
        // The same bounds as every outbound queue; nothing coalesced (`ConnectState.Stage`).
        let held: OutboundQueue<OutboundMessage>? =
            holding
            ? OutboundQueue(softLimitBytes: c.outboundHardLimitBytes, hardLimitBytes: c.outboundHardLimitBytes, maxCount: c.outboundMaxQueuedMessages)
            : nil
        // Registered with the socket first, so that deliveries from the moment the hub knows it
        // are held.
        change(.registering(user, held: held))
        do throws(RelayError) {
            try services.membership.register(
                socket, sid: sid, user: user.userID, on: socket.partition, deflate: socket.deflate, ip: socket.remoteIP, takesOffsets: takesOffsets)
        } catch {
            services.metrics.connections.authFailure(error.code)
            services.metrics.connections.connectsRefused.increment()
            change(.registrationRefused, .refused(error))
            return false
        }
        services.metrics.connections.connectsOK.increment()
        return true
    }

    // MARK: A new session

    /// A new session: register, join the CONNECT's rooms, answer with their offsets.
    private func connectFresh(_ user: AuthenticatedUser, request: ConnectRequest, takesOffsets: Bool, recovery: RecoveryResult?) {
        if let recovery { services.metrics.connections.recovery(recovery) }
        let plain = request.rooms.isEmpty && request.overBudget.isEmpty && !takesOffsets
        guard register(user, sid: socket.sid, holding: !plain, takesOffsets: takesOffsets) else { return }
        let partition = socket.partition
        let pid = takesOffsets ? RandomID.makeSecret() : nil
        if let pid {
            change(.assigned(pid: pid))
            services.handover.track(pid: pid, connection: socket.connectionID, on: partition)
        }
        var joined: [String] = []
        var refused: [(room: String, code: String)] = request.overBudget.map { ($0, RelayErrorCode.rateLimited.rawValue) }
        for room in request.rooms {
            guard user.rooms.allows(room) else {
                refused.append((room, RelayErrorCode.roomNotAuthorized.rawValue))
                continue
            }
            do throws(RelayError) {
                try services.membership.joinWithoutPresenceList(room: room, sink: socket, user: user.userID, on: partition)
                joined.append(room)
            } catch {
                refused.append((room, error.code.rawValue))
            }
        }
        if plain {
            change(.answered(ConnectAnswer(user: user)))
            logConnect(user)
            return
        }
        var streams = joined.map { StreamKey.room($0) }
        if takesOffsets { streams.append(.user(user.userID)) }
        // Heads are read once this node receives the streams, so the offsets in the answer and
        // the live events that follow them meet exactly.
        let loop = eventLoop
        let (joinedRooms, refusedRooms) = (joined, refused)
        let bound = NIOLoopBound(self, eventLoop: loop)
        services.broker.subscribedHeads(streams, on: loop).whenSuccess { heads in
            let me = bound.value
            guard me.stillAuthenticating else { return }
            let positions = Dictionary(heads, uniquingKeysWith: { a, _ in a })
            let rooms = joinedRooms.map { ($0, WireOffset(positions[.room($0)] ?? .zero, stream: .room($0)).description) }
            let following = heads.map { SocketChange.following($0.0, from: $0.1) }
            let answer = ConnectAnswer(user: user, pid: pid, recovered: false, rooms: rooms, refused: refusedRooms)
            me.socket.carryOut(.now(SocketUpdate(changes: following + [.answered(answer), .released(after: positions)])), for: me.socket.connectionID)
            me.logConnect(user)
        }
    }

    // MARK: Recovery

    /// The client came back with the `pid` of a kept session: same user, and every stream's
    /// history reaching back to where the socket was, or it is a new session.
    private func recover(_ record: KeptSession, user: AuthenticatedUser, request: ConnectRequest) {
        switch RecoveryPlan(recovering: record, as: user, request: request) {
        case .startFresh(let why):
            connectFresh(user, request: request, takesOffsets: true, recovery: why)
        case .readMissed(let rooms, let cuts):
            let bound = NIOLoopBound(self, eventLoop: eventLoop)
            readMissed(after: cuts).whenSuccess { first in
                let me = bound.value
                guard me.stillAuthenticating else { return }
                switch first {
                case .notRecovered(let why): me.connectFresh(user, request: request, takesOffsets: true, recovery: why)
                case .events(let before): me.resume(record, user: user, rooms: rooms, cuts: cuts, before: before)
                }
            }
        }
    }

    /// Registers under the old `sid`, rejoins the rooms, reads what came since the first read,
    /// then answers and replays.
    private func resume(
        _ record: KeptSession, user: AuthenticatedUser, rooms: [String], cuts: [StreamKey: StreamOffset],
        before: [StreamKey: [(offset: StreamOffset, message: OutboundMessage)]]
    ) {
        guard register(user, sid: record.socketSID, holding: true, takesOffsets: true) else { return }
        let partition = socket.partition
        change(.assigned(pid: record.pid), .following(.user(user.userID), from: cuts[.user(user.userID)] ?? .zero))
        services.handover.track(pid: record.pid, connection: socket.connectionID, on: partition)
        var restored: [String] = []
        for room in rooms {
            do throws(RelayError) {
                try services.membership.joinWithoutPresenceList(room: room, sink: socket, user: user.userID, on: partition)
                restored.append(room)
                change(.following(.room(room), from: cuts[.room(room)] ?? .zero))
            } catch {
                services.logger.info("recovered socket could not rejoin", metadata: ["room": "\(room)", "code": "\(error.code.rawValue)"])
            }
        }
        // What the first read reached; the second read continues from there.
        var reached: [StreamKey: StreamOffset] = [.user(user.userID): cuts[.user(user.userID)] ?? .zero]
        for room in restored { reached[.room(room)] = cuts[.room(room)] ?? .zero }
        for (stream, entries) in before where reached[stream] != nil {
            if let last = entries.last { reached[stream] = last.offset }
        }
        let (firstReached, restoredRooms) = (reached, restored)
        let bound = NIOLoopBound(self, eventLoop: eventLoop)
        // The second read starts once this node receives every stream: an event is then either
        // in the read or delivered live (or both: the socket drops the second copy).
        let loop = eventLoop
        let broker = services.broker
        EventLoopFuture.andAllSucceed(firstReached.keys.map { broker.whenSubscribed($0, on: loop) }, on: loop).flatMap {
            bound.value.readMissed(after: firstReached)
        }.whenComplete { result in
            let second: Missed
            switch result {
            case .success(let missed): second = missed
            case .failure: second = .notRecovered(.unavailable)
            }
            let me = bound.value
            guard me.stillAuthenticating else { return }
            guard case .events(let later) = second else {
                // Trimmed between the two reads: never a partial recovery. The client reconnects
                // and, its session taken, starts a new one.
                me.services.metrics.connections.recovery(.historyGone)
                me.socket.close(code: CloseCode.goingAway, reason: "recovery failed; reconnect")
                return
            }
            me.replay(record, user: user, rooms: restoredRooms, reached: firstReached, before: before, later: later)
        }
    }

    /// Answers the recovered CONNECT, then writes what the socket missed (both reads, in one
    /// order) and what was held meanwhile.
    private func replay(
        _ record: KeptSession, user: AuthenticatedUser, rooms: [String], reached: [StreamKey: StreamOffset],
        before: [StreamKey: [(offset: StreamOffset, message: OutboundMessage)]], later: [StreamKey: [(offset: StreamOffset, message: OutboundMessage)]]
    ) {
        var missed: [(position: StreamPosition, message: OutboundMessage)] = []
        var last = reached
        for stream in reached.keys {
            // The socket's own broadcasts were never sent to it; a receipt on a user stream
            // reached it through the room when it was a member; and what belongs to a room the
            // token does not allow is never replayed, as it is never delivered live.
            for entry in (before[stream] ?? []) + (later[stream] ?? [])
            where entry.message.origin != record.socketSID && !(entry.message.skipMembersOf.map(rooms.contains) ?? false)
                && DeliveryGate.admits(user, room: entry.message.skipMembersOf ?? entry.message.allowedIn) {
                missed.append((StreamPosition(stream: stream, offset: entry.offset), entry.message))
            }
            if let newest = later[stream]?.last?.offset { last[stream] = newest }
        }
        // One order across streams: by offset time, then stream, so each stream stays in order.
        missed.sort { ($0.position.offset, $0.position.stream.name) < ($1.position.offset, $1.position.stream.name) }
        let roomOffsets = rooms.map { ($0, WireOffset(last[.room($0)] ?? .zero, stream: .room($0)).description) }
        let replay = missed.map { position, message in
            var message = message
            message.stamp = RecoveryStamp(position: position)
            message.compressed = nil
            return message
        }
        change(
            .answered(ConnectAnswer(user: user, socketSID: record.socketSID, pid: record.pid, recovered: true, rooms: roomOffsets)), .replayed(replay),
            .released(after: last))
        services.metrics.connections.recovery(.recovered)
        services.logger.info("recovered", metadata: ["sid": "\(socket.sid)", "user": "\(user.userID)", "replayed": "\(missed.count)"])
    }

    /// Reads every stream's events after its offset; not recovered when one does not reach
    /// back, the store is down, or the socket missed more than `maxReplayBytes`.
    private func readMissed(after offsets: [StreamKey: StreamOffset]) -> EventLoopFuture<Missed> {
        let limit = max(1, services.recovery.historyLimits.maxEvents * 2)
        let reads = offsets.map { stream, offset in
            services.broker.history(of: stream, after: offset, limit: limit, maxBytes: Self.maxReplayBytes, on: eventLoop).map { (stream, $0) }
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
                    out[stream] = page.entries.map { (offset: $0.offset, message: OutboundMessage($0.item)) }
                    bytes += page.entries.reduce(0) { $0 + $1.item.byteCount }
                }
            }
            return bytes > Self.maxReplayBytes ? .notRecovered(.historyGone) : .events(out)
        }
    }

    private func logConnect(_ user: AuthenticatedUser) {
        services.logger.info("connect", metadata: ["sid": "\(socket.sid)", "user": "\(user.userID)", "ip": "\(socket.remoteIP)"])
    }

    // MARK: Leaving

    /// Keeps the session of a socket that takes offsets for the recovery window: `record`, the
    /// socket's own account of it, when its end is one that keeps it.
    func keepForRecovery(_ record: @autoclosure () -> KeptSession?) {
        guard services.broker.keepsHistory, let record = record() else { return }
        services.keptSessions.put(record, windowMs: services.recovery.windowMs)
    }

    /// Leaves the hub (rooms, presence, typing, live shares, the pid's entry). `left`: the
    /// client sent `41` (it left, it did not drop).
    func unregister(_ user: AuthenticatedUser, pid: String?, takesOffsets: Bool, end: ConnectionEnd, left: Bool = false) {
        if let pid { services.handover.untrack(pid: pid, connection: socket.connectionID) }
        services.membership.unregister(
            socket.connectionID, sid: socket.sid, user: user.userID, on: socket.partition, deflate: socket.deflate, takesOffsets: takesOffsets,
            holdPresence: !left && end.holdsPresence)
        services.logger.info("disconnect", metadata: ["sid": "\(socket.sid)", "user": "\(user.userID)", "reason": "\(end.metricLabel)"])
    }
}
