// The session terms the fuzz harnesses start from (the relay's shipped defaults when they were
// written); each harness sets what it varies. The relay itself fills `SessionConfiguration`
// from its settings table: the type has no defaults of its own.
extension SessionConfiguration {
    static let fuzzing = SessionConfiguration(
        heartbeat: .init(intervalMs: 25_000, timeoutMs: 20_000), connectTimeoutMs: 10_000, upgradeTimeoutMs: 10_000,
        maxPayload: 1_000_000, maxConnectPayload: 16_384, maxEventBytes: 64 * 1024, customEventsEnabled: true,
        maxAttachments: SocketPacket.defaultMaxAttachments,
        budgets: .init(
            events: .init(perSecond: 50, burst: 100), perClass: [:], errorReplies: .init(perSecond: 5, burst: 20),
            inbound: .init(
                packets: .init(perSecond: 250, burst: 500), bytes: .init(perSecond: 1_048_576, burst: 4_194_304),
                eventBytes: .init(perSecond: 262_144, burst: 524_288))),
        tokens: .init(leewayMs: 30_000, expiryNoticeMs: 60_000), maxRoomsInConnect: 100, maxConnectRefusals: 3)
}
