import RelayCore

/// Connection-state recovery: the history kept, how long a dropped session can be recovered,
/// and who gets offsets.
public struct RecoverySettings: Sendable, Equatable {
    /// Recoverable events kept per room and per user (history), for recovery and `room:sync`.
    public var historyLimits = HistoryLimits(maxEvents: 0, maxAgeMs: 0, maxBytes: 0, maxStreamBytes: 0)
    /// How long a dropped session can be recovered (at most the history's age limit).
    public var windowMs: Int64 = 0
    /// A reconnect with the `pid` of a connection that still looks alive takes it over (closes
    /// it, 4009, and recovers its session) once that connection is this old, ms. Younger, the
    /// reconnect is a new session: two sockets racing with one pid never recover it both in turn.
    public var takeoverAfterMs: Int64 = 0
    /// Every socket gets offsets and a `pid`, not only those that opt in.
    public var offsetsForEverySocket = false

    public init() {}
}
