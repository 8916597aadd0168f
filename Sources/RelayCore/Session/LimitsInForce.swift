/// The inbound limits a session's transports enforce in its current state: one value, asked of
/// the session (`EngineSession.limits`) and handed to the transports whenever it changes
/// (`EngineSession.Action.limits`), so no transport keeps a flag of its own.
public struct LimitsInForce: Sendable, Equatable {
    /// The largest message or frame (bytes) a transport takes.
    public var maxMessageBytes: Int
    /// Before CONNECT succeeded (or after a `41`): frames are refused at their header when they
    /// declare more than `maxMessageBytes`, so nobody unauthenticated makes the relay buffer more.
    public var preAuthentication: Bool

    public init(maxMessageBytes: Int, preAuthentication: Bool) {
        self.maxMessageBytes = maxMessageBytes
        self.preAuthentication = preAuthentication
    }

    /// What `lifecycle` allows: `maxPayload` once connected, the small pre-authentication size
    /// before CONNECT succeeded and again after a `41`.
    public init(_ lifecycle: SessionLifecycle, _ c: SessionConfiguration) {
        if case .connected = lifecycle {
            self.init(maxMessageBytes: c.maxPayload, preAuthentication: false)
        } else {
            self.init(maxMessageBytes: min(c.maxConnectPayload, c.maxPayload), preAuthentication: true)
        }
    }
}
