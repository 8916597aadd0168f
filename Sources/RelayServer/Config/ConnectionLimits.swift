/// How many connections the relay holds (in all, per user, per IP) and how much each may have
/// waiting to be written.
public struct ConnectionLimits: Sendable, Equatable {
    public var maxConnections = 0
    public var maxConnectionsPerUser = 0
    public var maxConnectionsPerIP = 0
    /// CONNECTs being set up past which new sessions are refused at their handshake
    /// (`PendingConnects`); 0: no limit.
    public var maxPendingConnects = 0
    /// Over this many queued bytes, coalescible events replace their older queued twin.
    public var outboundSoftLimitBytes = 256 * 1024
    /// Over this many queued bytes, the connection is closed (4008).
    public var outboundHardLimitBytes = 1024 * 1024
    public var outboundMaxQueuedMessages = 4096
    /// Live location shares one connection may run at once (`max-live-shares-per-connection`).
    public var maxLiveSharesPerConnection = 0

    public init() {}
}
