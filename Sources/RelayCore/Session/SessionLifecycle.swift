/// Where one Engine.IO session stands with its Socket.IO socket, each case carrying what holds in
/// it: the CONNECT deadline while one is awaited, the identity and token deadlines once
/// connected. There are no flags beside it: leaving a state drops its data, so a path the main
/// one never takes (a `41`, a late CONNECT) cannot keep what the last state left.
///
/// The limits that hold in each state are `limits(_:)`: before CONNECT succeeded (and again
/// after a `41`) the small pre-authentication size; once connected `maxPayload`.
public enum SessionLifecycle: Sendable, Equatable {
    /// No socket: CONNECT (`40`) is due by `deadline` (monotonic ms). `left`: a socket of this
    /// session left with `41` (such a session is never kept for recovery). `refusals`: CONNECTs
    /// of this session refused so far (a refusal leaves the session open for another `40`, up
    /// to `maxConnectRefusals`).
    case awaitingConnect(deadline: Int64, left: Bool, refusals: Int)
    /// The CONNECT's token is being verified (and its rooms joined): no deadline of its own,
    /// the verification's lookups are bounded and the heartbeat goes on.
    case verifying(left: Bool, refusals: Int)
    /// The socket is connected as `login.user`.
    case connected(Login)
    /// The session ended. `left`: it ended after or because of a `41`.
    case closed(left: Bool)

    /// A connected socket: who, the deadlines of its token, and its CONNECT answer.
    public struct Login: Sendable, Equatable {
        public var user: AuthenticatedUser
        /// When `auth:expiring` is sent and when the socket is closed for `exp` (+ leeway).
        @PackedDeadline public var expiryNoticeAt: Int64? = nil
        @PackedDeadline public var expiryAt: Int64? = nil
        /// Rooms the CONNECT joined: a `41` leaves them and pays their leave from the join
        /// budget, as `room:leave` would.
        public var rooms: Int
        /// The CONNECT answer, repeated if the client sends CONNECT again; `nil` when it was the
        /// plain `{"sid"}` (made again from the sid if asked).
        public var answer: [UInt8]?

        public init(user: AuthenticatedUser, rooms: Int = 0, answer: [UInt8]? = nil) {
            self.user = user
            self.rooms = rooms
            self.answer = answer
        }

        /// Deadlines for `exp` (seconds since 1970, wall clock) on the monotonic clock;
        /// saturating, so an `exp` far in the future never overflows.
        mutating func armTokenExpiry(_ timing: SessionConfiguration.TokenTiming, now: Int64, wallMs: Int64) {
            let (expMs, overflow) = user.expiresAt.multipliedReportingOverflow(by: 1000)
            guard !overflow else {
                expiryAt = nil
                expiryNoticeAt = nil
                return
            }
            let expiresAt = now.saturatingAdding(expMs.saturatingSubtracting(wallMs))
            expiryAt = expiresAt.saturatingAdding(timing.leewayMs)
            expiryNoticeAt = timing.expiryNoticeMs > 0 ? max(now, expiresAt.saturatingSubtracting(timing.expiryNoticeMs)) : nil
        }
    }

    public var isClosed: Bool {
        if case .closed = self { return true }
        return false
    }

    /// A socket of this session left with `41` and none has connected since.
    public var left: Bool {
        switch self {
        case .awaitingConnect(_, let left, _), .verifying(let left, _), .closed(let left): return left
        case .connected: return false
        }
    }

    /// The deadline this state holds (the CONNECT's), if any.
    public var deadline: Int64? {
        if case .awaitingConnect(let deadline, _, _) = self { return deadline }
        return nil
    }
}
