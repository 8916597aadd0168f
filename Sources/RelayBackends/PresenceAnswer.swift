import NIOCore
import RelayCore

/// One user's presence as the presence API answers it.
public struct UserPresence: Sendable, Equatable {
    public var user: String
    /// Sockets of the user (every node's, in a cluster with Redis up).
    public var devices: Int
    /// The rooms the user has presence in, sorted (only when asked for).
    public var rooms: [String]
    /// When a socket of the user last disconnected (wall ms), if known.
    public var lastSeen: Int64?

    public init(user: String, devices: Int, rooms: [String] = [], lastSeen: Int64? = nil) {
        self.user = user
        self.devices = devices
        self.rooms = rooms
        self.lastSeen = lastSeen
    }

    public var online: Bool { devices > 0 }
}

/// An answer of the presence manager, and whether it is only this node's view (a cluster node
/// that cannot reach Redis).
public struct PresenceAnswer<Value: Sendable>: Sendable {
    public var value: Value
    public var degraded: Bool

    public init(_ value: Value, degraded: Bool = false) {
        self.value = value
        self.degraded = degraded
    }
}
