import RelayCore

/// Delivery receipts: the SQLite file, retention, group commit and how many one user or one
/// connection may have in flight.
public struct ReceiptSettings: Sendable, Equatable {
    public var databasePath = ""
    /// Receipts older than this are deleted in the background; `nil` keeps them.
    public var retentionDays: Int?
    /// Most receipts per transaction (group commit).
    public var maxBatch = 1024
    /// Receipts (`message:delivered`/`message:read`) one user may write per second across all
    /// of their connections; over it they get `rate_limited`.
    public var perUser = EventRateLimiter.Budget(perSecond: 0, burst: 0)
    /// Receipts of one connection waiting for their commit; more get `rate_limited`.
    public var maxPendingPerConnection = 0
    /// Who gets each kind's forward: the room, or the authors' and the reader's devices.
    public var audiences = ReceiptAudiences(delivered: .room, read: .room)
    /// Forwards coalesced per room and kind over this window (ms); 0: each commit's at once.
    public var forwardWindowMs: Int64 = 0

    public init() {}
}
