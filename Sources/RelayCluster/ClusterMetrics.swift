import CoreMetrics

/// What the Redis side reports: whether its link is up, and events it could only deliver on this
/// node (Redis unreachable). Created with the node's other metrics (`RelayMetrics.cluster`).
public struct ClusterMetrics: Sendable {
    /// `relay_redis_link_up`: 1 while the link is up.
    public let linkUp: Meter
    /// `relay_redis_degraded_total`.
    public let degraded: Counter

    public init(linkUp: Meter, degraded: Counter) {
        self.linkUp = linkUp
        self.degraded = degraded
    }
}
