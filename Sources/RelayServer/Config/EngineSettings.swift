/// The Engine.IO transport's terms: heartbeat, the largest message before and after CONNECT,
/// the time to send CONNECT, and permessage-deflate.
public struct EngineSettings: Sendable, Equatable {
    public var pingIntervalMs = 0
    public var pingTimeoutMs = 0
    /// Largest inbound message (bytes); larger ones close the socket with 1009.
    public var maxPayload = 0
    /// Largest inbound message or frame (bytes) before CONNECT succeeded: an unauthenticated
    /// socket cannot make the relay buffer `maxPayload` (1009 when over).
    public var maxConnectPayload = 0
    /// Time for a client to send CONNECT (`40`) after the socket opens (and after a `41`).
    public var connectTimeoutMs = 0
    /// Refused CONNECTs one session may have; the last closes it (4003).
    public var maxConnectRefusals = 0
    /// Time for a probing WebSocket to complete the upgrade (`2probe` … `5`), and the window
    /// after it in which late polling requests are still the session's.
    public var upgradeTimeoutMs = 0
    /// Negotiate permessage-deflate with clients that offer it.
    public var deflateEnabled = false
    /// Messages smaller than this go uncompressed even to deflate clients.
    public var deflateThresholdBytes = 0

    public init() {}
}
