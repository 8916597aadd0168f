import RelayCore

// The values RelayCore's unit tests run with. They are the tests' own (the relay's shipped
// defaults when they were written, README's settings table); the relay itself fills these
// types from its settings table, and a test that depends on one value sets it.

extension InboundBudget.Limits {
    public static let testing = InboundBudget.Limits(
        packets: .init(perSecond: 250, burst: 500), bytes: .init(perSecond: 1_048_576, burst: 4_194_304),
        eventBytes: .init(perSecond: 256 * 1024, burst: 512 * 1024))
}

extension HistoryLimits {
    /// 200 events, 2 minutes, 256 MiB in all, 2 MiB a stream.
    public static let testing = HistoryLimits(maxEvents: 200, maxAgeMs: 120_000, maxBytes: 256 << 20, maxStreamBytes: 2 << 20)

    /// `testing` with the bounds a test names.
    public static func testing(maxEvents: Int = 200, maxAgeMs: Int64 = 120_000, maxBytes: Int = 256 << 20, maxStreamBytes: Int = 2 << 20) -> HistoryLimits {
        HistoryLimits(maxEvents: maxEvents, maxAgeMs: maxAgeMs, maxBytes: maxBytes, maxStreamBytes: maxStreamBytes)
    }
}

extension SessionConfiguration {
    public static let testing = SessionConfiguration(
        heartbeat: .init(intervalMs: 25_000, timeoutMs: 20_000), connectTimeoutMs: 10_000, upgradeTimeoutMs: 10_000,
        maxPayload: 1_000_000, maxConnectPayload: 16_384, maxEventBytes: 64 * 1024, customEventsEnabled: true,
        maxAttachments: SocketPacket.defaultMaxAttachments,
        budgets: .init(events: .init(perSecond: 50, burst: 100), perClass: [:], errorReplies: .init(perSecond: 5, burst: 20), inbound: .testing),
        tokens: .init(leewayMs: 30_000, expiryNoticeMs: 60_000), maxRoomsInConnect: 100, maxConnectRefusals: 3)
}
