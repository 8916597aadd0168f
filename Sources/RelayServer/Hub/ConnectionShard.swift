import RelayCore

/// What the hub keeps about the connections whose ids fall in one shard: the rooms each is in
/// (the per-connection limit is checked here) and what the admin API shows of it.
struct ConnectionShard: Sendable {
    var rooms: ConnectionRooms
    var info: [ConnectionID: ConnectionInfo] = [:]
}
