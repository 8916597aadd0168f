import NIOCore

/// What a webhook presence change is about.
public enum PresenceSubject: Sendable, Equatable {
    case user
    case room
}

/// A user (room) whose presence crossed 0 ↔ 1 across the whole deployment: the webhooks'
/// `user:online`/`offline` (`room:occupied`/`vacated`).
public struct PresenceCrossing: Sendable, Equatable {
    public var subject: PresenceSubject
    public var name: String
    /// Present now (online, occupied), or gone.
    public var present: Bool
    /// When gone: how long it was present (ms); 0 when it came.
    public var presentForMs: Int64
    /// Wall time of the crossing (ms).
    public var ts: Int64

    public init(subject: PresenceSubject, name: String, present: Bool, presentForMs: Int64, ts: Int64) {
        self.subject = subject
        self.name = name
        self.present = present
        self.presentForMs = presentForMs
        self.ts = ts
    }
}

/// Who decides that a user or a room came or went for the whole deployment, for the webhooks:
/// this node's first socket of a user (first member of a room) is not the deployment's when
/// another node has one. `LocalWebhookPresence` on one node (this node is the deployment);
/// `RedisWebhookPresence` (RelayCluster) in a cluster, where Redis decides atomically and
/// exactly one node sees each crossing, and a dead node's users and rooms are swept once.
public protocol WebhookPresence: AnyObject, Sendable {
    /// Where crossings go (the webhook queue). Set once, before any change.
    func setCrossingHandler(_ handler: @escaping @Sendable (PresenceCrossing) -> Void)
    /// This node got its first socket of `name` (`present`), or closed its last. Called under
    /// the hub's lock: O(1), no I/O, no waiting.
    func change(_ subject: PresenceSubject, _ name: String, present: Bool)
    /// The node is stopping, its sockets gone: what it still holds leaves (announced).
    func leave() async
}
