/// Joining other nodes on Redis.
public struct ClusterSettings: Sendable, Equatable {
    /// `redis://host:port`: join the other nodes on this Redis (nil: a single node).
    public var redisURL: String?
    /// This node's id among the nodes (default: random at start).
    public var nodeID: String?
    /// Heartbeat period; a node silent for three periods is presumed dead and leaves presence.
    public var heartbeatMs: Int64 = 0

    public init() {}
}
