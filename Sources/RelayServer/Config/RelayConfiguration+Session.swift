import RelayCore

extension RelayConfiguration {
    /// The part of the configuration every `EngineSession` enforces.
    public var sessionConfiguration: SessionConfiguration {
        SessionConfiguration(
            heartbeat: .init(intervalMs: Int64(engine.pingIntervalMs), timeoutMs: Int64(engine.pingTimeoutMs)),
            connectTimeoutMs: Int64(engine.connectTimeoutMs),
            upgradeTimeoutMs: Int64(engine.upgradeTimeoutMs),
            maxPayload: engine.maxPayload,
            maxConnectPayload: engine.maxConnectPayload,
            maxEventBytes: events.maxEventBytes,
            customEventsEnabled: events.customEventsEnabled,
            maxAttachments: SocketPacket.defaultMaxAttachments,
            budgets: .init(
                events: events.eventsPerSecond, perClass: events.eventsPerSecondByClass,
                errorReplies: events.errorReplies, inbound: events.inbound),
            tokens: .init(leewayMs: auth.jwtLeewaySeconds * 1000, expiryNoticeMs: auth.tokenExpiryNoticeMs),
            maxRoomsInConnect: events.maxRoomsPerConnection, maxConnectRefusals: engine.maxConnectRefusals)
    }
}
