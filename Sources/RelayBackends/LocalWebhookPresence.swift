import RelayLocks

/// Webhook presence of a single node: this node is the whole deployment, so its own first and
/// last are the crossings.
public final class LocalWebhookPresence: WebhookPresence {
    private let wallMs: @Sendable () -> Int64
    /// When each user came online (wall ms), for `user:offline`'s `onlineMs`.
    private let onlineSince = AuditedLock<[String: Int64]>([:])
    private let handler = CallbackSlot<@Sendable (PresenceCrossing) -> Void>()

    public init(wallMs: @escaping @Sendable () -> Int64) {
        self.wallMs = wallMs
    }

    public func setCrossingHandler(_ handler: @escaping @Sendable (PresenceCrossing) -> Void) {
        self.handler.set(handler)
    }

    public func change(_ subject: PresenceSubject, _ name: String, present: Bool) {
        let now = wallMs()
        var presentFor: Int64 = 0
        if subject == .user {
            if present {
                onlineSince.withLockedValue { $0[name] = now }
            } else {
                presentFor = now - (onlineSince.withLockedValue { $0.removeValue(forKey: name) } ?? now)
            }
        }
        handler.value?(PresenceCrossing(subject: subject, name: name, present: present, presentForMs: presentFor, ts: now))
    }

    public func leave() async {}
}
