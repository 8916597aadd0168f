/// The process over time: giving memory back after churn, and a graceful shutdown.
public struct LifecycleSettings: Sendable, Equatable {
    /// How often the heap may be trimmed after connection churn (`HeapTrimmer`); 0: never.
    public var heapTrimIntervalMs = 0
    /// Sessions that must have ended since the last trim for the next one.
    public var heapTrimAfterSessions = 0
    /// Sockets told to go per second during a graceful shutdown, so they do not all reconnect at once.
    public var drainRatePerSecond = 0
    /// Upper bound of a graceful shutdown; sockets still open then are closed at once.
    public var shutdownTimeoutMs = 0

    public init() {}
}
