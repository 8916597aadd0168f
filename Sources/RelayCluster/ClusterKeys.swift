import RelayCore

/// The names of the cluster's Redis keys and channels. Every key of a room, user or node
/// carries its name as a hash tag, so Redis Cluster keeps one name's keys in one slot.
package enum ClusterKeys {
    /// `{name}`: the hash tag of a room's, user's or node's keys and channel (Redis Cluster puts
    /// keys with one tag in one slot). A name that starts with `}` would make the tag empty (the
    /// whole key hashed): it gets a U+001F first (no valid name has one, so no two names meet).
    ///
    /// Redis hashes bytes, so every test here is on bytes (UTF-8), never on characters: `}`
    /// followed by a combining mark is one `Character` but still a `}` byte to Redis.
    package static func tag(_ name: String) -> String {
        name.utf8.first == UInt8(ascii: "}") ? "{\u{1F}" + name + "}" : "{" + name + "}"
    }

    /// The name inside a `tag`: nil when `tagged` is not one.
    package static func untag(_ tagged: Substring) -> String? {
        let bytes = tagged.utf8
        guard bytes.count >= 2, bytes.first == UInt8(ascii: "{"), bytes.last == UInt8(ascii: "}") else { return nil }
        var inner = bytes.dropFirst().dropLast()
        if inner.count >= 2, inner.first == 0x1F, inner.dropFirst().first == UInt8(ascii: "}") { inner = inner.dropFirst() }
        return String(decoding: inner, as: UTF8.self)
    }

    package static func roomChannel(_ room: String) -> String { "relay:room:" + tag(room) }
    package static func userChannel(_ user: String) -> String { "relay:user:" + tag(user) }
    /// The live nodes, scored by their last heartbeat.
    package static let nodes = "relay:nodes"

    // Presence (ClusterPresenceStore).
    package static func presence(_ room: String) -> String { "relay:presence:" + tag(room) }
    package static func presenceUsers(_ room: String) -> String { "relay:presence-users:" + tag(room) }
    package static func nodeRooms(_ node: String) -> String { "relay:node-rooms:" + tag(node) }

    // The user directory (ClusterDirectory).
    package static func directory(_ user: String) -> String { "relay:directory:" + tag(user) }
    package static func userRooms(_ user: String) -> String { "relay:user-rooms:" + tag(user) }
    package static func nodeUsers(_ node: String) -> String { "relay:node-users:" + tag(node) }

    /// The field of `relay:user-rooms:{user}` that `node` owns for `room`.
    package static func userRoomField(room: String, node: String) -> String { room + "\u{1F}" + node }

    /// The room of a `room\u{1F}node` field (the node id has no U+001F; a room may).
    package static func room(ofUserRoomField field: String) -> String? {
        guard let separator = field.lastIndex(of: "\u{1F}") else { return nil }
        return String(field[..<separator])
    }
}
