import RelayCore

/// What the hub keeps about the rooms whose names hash to one shard: members and presence,
/// typing windows. A publish, join, leave or typing change takes only its room's shard.
struct RoomShard: Sendable {
    var rooms: RoomRegistry
    var typing: TypingDebouncer
}
