/// The process over time: giving memory back after churn, and a graceful shutdown.
public struct LifecycleSettings: Sendable, Equatable {
    /// How often the heap may be trimmed after connection churn (`HeapTrimmer`); 0: never.
    public var heapTrimIntervalMs = 0
    /// Sessions that must have ended since the last trim for the next one.
    public var heapTrimAfterSessions = 0
    /// Sockets told to go per second during a graceful shutdown, so they do not all reconnect
    /// to the other nodes at once; 0: `clusterDrainRate` with Redis, all at once without.
    public var drainRatePerSecond = 0
    /// Upper bound of a graceful shutdown; sockets still open then are closed at once.
    public var shutdownTimeoutMs = 0

    public init() {}

    /// The rate a node in a cluster drains at when `drainRatePerSecond` is 0.
    public static let clusterDrainRate = 2_000

    /// Sockets told to go per tenth of a second. Spreading them only helps when other nodes
    /// take them (`otherNodes`: the node joined a cluster through Redis); a node alone tells
    /// all at once, or its restart would keep its port closed while its clients back off.
    public func drainBatch(otherNodes: Bool) -> Int {
        let rate = drainRatePerSecond > 0 ? drainRatePerSecond : (otherNodes ? Self.clusterDrainRate : 0)
        return rate > 0 ? max(1, rate / 10) : .max
    }
}
