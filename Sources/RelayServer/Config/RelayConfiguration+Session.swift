import RelayCore

extension RelayConfiguration {
    /// The part of the configuration every `EngineSession` enforces.
    public var sessionConfiguration: SessionConfiguration {
        var s = SessionConfiguration()
        s.pingIntervalMs = Int64(pingIntervalMs)
        s.pingTimeoutMs = Int64(pingTimeoutMs)
        s.connectTimeoutMs = Int64(connectTimeoutMs)
        s.maxPayload = maxPayload
        s.maxEventBytes = maxEventBytes
        s.customEventsEnabled = customEventsEnabled
        s.eventsPerSecond = eventsPerSecond
        s.eventsPerClass = eventsPerSecondByClass
        s.errorReplies = errorReplies
        s.inbound = inbound
        s.maxRoomsInConnect = maxRoomsPerConnection
        s.tokenLeewayMs = jwtLeewaySeconds * 1000
        s.expiryNoticeMs = tokenExpiryNoticeMs
        return s
    }
}
