/// A user's devices in a room before and after a change, and the room's presence after it:
/// cluster-wide from Redis, or this node's.
public struct PresenceUpdate: Sendable {
    public var before: Int
    public var after: Int
    public var presence: [PresenceEntry]

    public init(before: Int, after: Int, presence: [PresenceEntry]) {
        self.before = before
        self.after = after
        self.presence = presence
    }

    /// The user's first device (anywhere) joined.
    public var becamePresent: Bool { before == 0 && after > 0 }
    /// The user's last device (anywhere) left.
    public var leftPresence: Bool { before > 0 && after == 0 }
}
