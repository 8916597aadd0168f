/// One socket's CONNECT as a value: who it registered with the hub as, how far the CONNECT's
/// setup is (and the hub deliveries held meanwhile), and what connection state recovery needs —
/// whether the socket takes offsets, its private session id (`pid`), and its position in each
/// of its streams (`RecoveryLog`). The server's `ConnectSetup` does the I/O around it (tokens,
/// the hub, history reads); every decision that needs none is here.
///
/// Generic over the held message, so it is tested without the server's message type.
public struct ConnectState<Message: Sendable>: Sendable {
    /// How far the socket's CONNECT is.
    public enum Stage: Sendable {
        /// Not registered with the hub: before CONNECT (its token or kept session still being
        /// looked up), or after the socket left with `41`. Deliveries cannot reach it.
        case fresh
        /// Registered as `user` while the CONNECT is set up (rooms joined, heads or missed events
        /// read): the hub's deliveries wait in `held`, so that the CONNECT answer and the missed
        /// events go first. Bounded like every outbound queue (bytes and messages): a socket
        /// whose CONNECT waits on a slow Redis while its rooms are busy is closed, not left to
        /// grow. Nothing is coalesced here: what is held is replayed in order against the
        /// recovered offsets. Boxed (`indirect`): a stage lasting a moment should not make
        /// every socket's state the size of a queue.
        indirect case settingUp(user: AuthenticatedUser, held: OutboundQueue<Message>)
        /// Registered as `user`, nothing held: deliveries are written as they come.
        case connected(user: AuthenticatedUser)
    }

    /// What to do with one hub delivery.
    public enum Delivery: Sendable, Equatable {
        /// Nothing is held: write it now.
        case writeNow
        /// Held until the CONNECT is answered.
        case held
        /// Past the bounds of what is held: close the socket (slow consumer).
        case overflow
    }

    public private(set) var stage = Stage.fresh
    /// The socket opted in to offsets (or every socket gets them) and history is kept:
    /// recoverable events reach it with their offset as the last argument, and `log` tracks
    /// where it stands.
    public private(set) var takesOffsets = false
    /// The pid, the answer's time and the log, made at the first of them: only sockets that take
    /// offsets have any, and the others (most) keep a pointer instead of about 90 bytes.
    private var offsets: Offsets?

    /// The private session id (only for sockets that take offsets).
    public var pid: String? { offsets?.pid }
    /// When the CONNECT of a socket that takes offsets was answered (monotonic ms): the age a
    /// takeover needs.
    public var answeredAtMs: Int64? { offsets?.answeredAtMs }
    public var log: RecoveryLog { offsets?.log ?? RecoveryLog() }

    public init() {}

    /// The user registered with the hub, from registration until the socket leaves.
    public var user: AuthenticatedUser? {
        switch stage {
        case .fresh: return nil
        case .settingUp(let user, _), .connected(let user): return user
        }
    }

    /// Hub deliveries are held (the CONNECT is being set up).
    public var isHolding: Bool {
        if case .settingUp = stage { return true }
        return false
    }

    /// The bytes of the deliveries held (0 when none are).
    public var heldBytes: Int {
        if case .settingUp(_, let held) = stage { return held.queuedBytes }
        return 0
    }

    // MARK: CONNECT

    /// The token was verified: whether this CONNECT takes offsets.
    public mutating func begin(takesOffsets: Bool) {
        self.takesOffsets = takesOffsets
    }

    /// The socket registers with the hub as `user`. With `held`, the hub's deliveries wait in it
    /// until `release`; without, they are written at once.
    public mutating func register(_ user: AuthenticatedUser, holdingIn held: OutboundQueue<Message>?) {
        stage = held.map { Stage.settingUp(user: user, held: $0) } ?? .connected(user: user)
    }

    /// The hub refused the registration: the socket is not registered and holds nothing.
    public mutating func registrationRefused() {
        stage = .fresh
    }

    /// The socket's private session id: a new one, or the recovered session's.
    public mutating func assign(pid: String) {
        withOffsets { $0.pid = pid }
    }

    /// A hub delivery to the socket: held while the CONNECT is set up.
    public mutating func hold(_ message: Message, bytes: Int) -> Delivery {
        guard case .settingUp(let user, var held) = stage else { return .writeNow }
        // Out of `stage` while it grows, so the queue is not copied.
        stage = .fresh
        defer { stage = .settingUp(user: user, held: held) }
        return held.enqueue(message, bytes: bytes) == .queued ? .held : .overflow
    }

    /// The CONNECT was answered at `nowMs`.
    public mutating func answered(atMs nowMs: Int64) {
        // Only a takeover reads it, and only of a socket that takes offsets.
        if takesOffsets { withOffsets { $0.answeredAtMs = nowMs } }
    }

    /// Ends the setup: the held deliveries to write now, in order, without those the socket
    /// already has — a stream offset (`position`) at or before where `positions` say the socket
    /// stands. Nothing is held afterwards.
    public mutating func release(
        after positions: [StreamKey: StreamOffset], position: (Message) -> (stream: StreamKey, offset: StreamOffset)?
    ) -> [Message] {
        guard case .settingUp(let user, var held) = stage else { return [] }
        stage = .connected(user: user)
        var out: [Message] = []
        out.reserveCapacity(held.count)
        while let message = held.dequeue() {
            if let at = position(message), let reached = positions[at.stream], at.offset <= reached { continue }
            out.append(message)
        }
        return out
    }

    /// The socket proved a new token of the same user (`auth:refresh`).
    public mutating func refreshed(_ user: AuthenticatedUser) {
        switch stage {
        case .fresh: return
        case .settingUp(_, let held): stage = .settingUp(user: user, held: held)
        case .connected: stage = .connected(user: user)
        }
    }

    // MARK: Offsets

    /// The socket follows `stream` (joined at CONNECT, or recovered), whose newest offset it
    /// has is `head`; nothing to track for a socket that does not take offsets.
    public mutating func follow(_ stream: StreamKey, from head: StreamOffset) {
        if takesOffsets { withOffsets { $0.log.follow(stream, from: head) } }
    }

    /// The socket joined `stream` with `room:join`, its head read after the join
    /// (`RecoveryLog.join`).
    public mutating func join(_ stream: StreamKey, at head: StreamOffset) {
        if takesOffsets { withOffsets { $0.log.join(stream, at: head) } }
    }

    /// The socket left `stream`.
    public mutating func unfollow(_ stream: StreamKey) {
        if offsets != nil { withOffsets { $0.log.unfollow(stream) } }
    }

    /// An event of `stream` at `offset` is about to be written: `false` when the socket already
    /// has it (a replay raced the live event), and it is dropped.
    public mutating func record(_ stream: StreamKey, _ offset: StreamOffset) -> Bool {
        withOffsets { $0.log.record(stream, offset) }
    }

    // MARK: Leaving

    /// Whether a reconnect with `pid` by `userID` at `nowMs` takes this live socket's session
    /// over: the socket takes offsets, its pid and user are the reconnect's, and it answered its
    /// CONNECT at least `afterMs` ago (two sockets racing with one pid never take it in turn).
    public func mayHandOver(pid: String, userID: String, nowMs: Int64, afterMs: Int64) -> Bool {
        guard takesOffsets, let mine = self.pid, mine == pid, let user, user.userID == userID, let since = answeredAtMs else { return false }
        return nowMs - since >= afterMs
    }

    /// The session to keep for the recovery window when the socket ended for `end`, or `nil`:
    /// only for a registered socket that takes offsets, not after the client left with `41`
    /// (`clientDisconnected`), and only for an end that keeps it.
    public func keptRecord(socketSID: String, end: ConnectionEnd, clientDisconnected: Bool, wallMs: Int64) -> KeptSession? {
        guard takesOffsets, let pid, let user, end.keepsSessionForRecovery, !clientDisconnected else { return nil }
        let rooms = log.streams.compactMap { stream -> String? in
            if case .room(let room) = stream { return room }
            return nil
        }.sorted()
        return KeptSession(pid: pid, socketSID: socketSID, userID: user.userID, rooms: rooms, log: log, disconnectedAtMs: wallMs)
    }
}

extension ConnectState {
    /// What connection state recovery keeps of a socket that takes offsets. A box, shared by
    /// copies of the state until one of them writes (copy-on-write, `withOffsets`).
    ///
    /// (`@unchecked Sendable`: it is written only through `withOffsets`, which copies it first
    /// unless the state writing is its only owner; a box that two states share — the only way
    /// two threads could reach one — is never written.)
    private final class Offsets: @unchecked Sendable {
        var pid: String?
        var answeredAtMs: Int64?
        var log = RecoveryLog()

        init() {}

        init(copying other: Offsets) {
            pid = other.pid
            answeredAtMs = other.answeredAtMs
            log = other.log
        }
    }

    /// Changes the offsets' box, made first if there is none, copied first if shared.
    private mutating func withOffsets<Result>(_ change: (Offsets) -> Result) -> Result {
        let box: Offsets
        if isKnownUniquelyReferenced(&offsets), let current = offsets {
            box = current
        } else {
            box = offsets.map(Offsets.init(copying:)) ?? Offsets()
            offsets = box
        }
        return change(box)
    }
}
