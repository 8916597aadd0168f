import RelayCore

/// Everything a relay process is told at startup. Defaults are the documented production
/// defaults (see README "Configuration").
///
/// A property that a setting writes starts at zero (or empty) here: `init` writes each
/// setting's declared default (`ConfigurationLoader.settings`), so every default is written
/// once. Properties that no setting writes keep the defaults written here.
public struct RelayConfiguration: Sendable {
    /// How client tokens are signed (declared with the token verifier).
    public typealias JWTAlgorithm = TokenAlgorithm

    public var listener = ListenerSettings()
    public var auth: AuthSettings
    public var engine = EngineSettings()
    public var events = EventSettings()
    public var connections = ConnectionLimits()
    public var receipts = ReceiptSettings()
    public var recovery = RecoverySettings()
    public var cluster = ClusterSettings()
    /// Signed webhooks to the backend (off without a URL; docs/PROTOCOL.md §13).
    public var webhooks = WebhookSettings()
    public var lifecycle = LifecycleSettings()

    /// Makes the limits hold together: the event-bytes burst lets one event of `maxEventBytes`
    /// through, the inbound byte burst two messages of `maxPayload`, and every connection's
    /// outbound budget holds two of the largest events, so no event a sender may send ends a
    /// recipient that reads. (The defaults go further: one sender's whole event-bytes burst,
    /// 512 KiB, is half the 1 MiB outbound limit.)
    public mutating func applyEventByteBounds() {
        events.inbound.eventBytes.burst = max(events.inbound.eventBytes.burst, Double(events.maxEventBytes))
        events.inbound.bytes.burst = max(events.inbound.bytes.burst, 2 * Double(engine.maxPayload))
        let (twoEvents, overflow) = events.maxEventBytes.multipliedReportingOverflow(by: 2)
        connections.outboundHardLimitBytes = max(connections.outboundHardLimitBytes, overflow ? .max : twoEvents)
        connections.outboundSoftLimitBytes = min(connections.outboundSoftLimitBytes, connections.outboundHardLimitBytes)
    }

    public init(jwt: JWTAlgorithm, apiKey: String, adminKey: String) {
        self.init(unfilledJWT: jwt, apiKey: apiKey, adminKey: adminKey)
        for setting in ConfigurationLoader.settings {
            guard let value = setting.defaultValue else { continue }
            let problems = setting.apply(value, &self)
            assert(problems.isEmpty, "the default of \(setting.name) is invalid: \(problems)")
        }
    }

    /// The properties as the types declare them, before any setting's default is written: what
    /// `SettingsDeclaredOnceTests` checks holds no default of its own.
    init(unfilledJWT jwt: JWTAlgorithm, apiKey: String, adminKey: String) {
        auth = AuthSettings(jwt: jwt, apiKey: apiKey, adminKey: adminKey)
    }
}
