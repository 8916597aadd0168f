import RelayCore

extension RelayConfiguration {
    /// The part of the configuration every `EngineSession` enforces.
    public var sessionConfiguration: SessionConfiguration {
        var s = SessionConfiguration()
        s.pingIntervalMs = Int64(engine.pingIntervalMs)
        s.pingTimeoutMs = Int64(engine.pingTimeoutMs)
        s.connectTimeoutMs = Int64(engine.connectTimeoutMs)
        s.maxPayload = engine.maxPayload
        s.maxConnectPayload = engine.maxConnectPayload
        s.upgradeTimeoutMs = Int64(engine.upgradeTimeoutMs)
        s.maxEventBytes = events.maxEventBytes
        s.customEventsEnabled = events.customEventsEnabled
        s.eventsPerSecond = events.eventsPerSecond
        s.eventsPerClass = events.eventsPerSecondByClass
        s.errorReplies = events.errorReplies
        s.inbound = events.inbound
        s.maxRoomsInConnect = events.maxRoomsPerConnection
        s.tokenLeewayMs = auth.jwtLeewaySeconds * 1000
        s.expiryNoticeMs = auth.tokenExpiryNoticeMs
        return s
    }
}
