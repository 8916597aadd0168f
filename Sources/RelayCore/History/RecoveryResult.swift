/// How a reconnect's attempt at connection state recovery went: the label of
/// `relay_recoveries_total{result}`.
public enum RecoveryResult: Sendable, Equatable, CaseIterable {
    /// The session was recovered: its sid, rooms and missed events.
    case recovered
    /// No session is kept under the pid (never was, expired, or already recovered).
    case unknownSession
    /// The session is another user's.
    case userMismatch
    /// The client named an offset that is not one.
    case invalidOffset
    /// A stream's history no longer reaches back to where the socket was, or it missed more
    /// than a recovery replays.
    case historyGone
    /// The session or history store could not be reached.
    case unavailable

    /// The `result` label: dashboards and tests read these, so they never change.
    public var metricLabel: String {
        switch self {
        case .recovered: return "recovered"
        case .unknownSession: return "unknown_session"
        case .userMismatch: return "user_mismatch"
        case .invalidOffset: return "invalid_offset"
        case .historyGone: return "history_gone"
        case .unavailable: return "unavailable"
        }
    }
}
