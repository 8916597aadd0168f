import Logging
import NIOConcurrencyHelpers
import NIOCore
import RelayCore

/// What the admin API reads and does.
extension Hub {
    // MARK: Admin helpers

    /// Where a public `sid` lives, for admin lookups and kicks.
    public func locate(sid: String) -> (ConnectionID, LoopShard)? {
        sidShards.shard(for: sid).withLockedValue { $0[sid] }.map { ($0.0, shards[$0.1]) }
    }

    /// A user's connections with their rooms, for the admin API.
    public func connections(of user: String) -> [(ConnectionInfo, [String])] {
        let ids = userShards.shard(for: user).withLockedValue { $0.directory.connections(of: user) }
        return ids.compactMap { id in
            connectionShards.shard(for: id).withLockedValue { c in c.info[id].map { ($0, c.rooms.rooms(of: id).sorted()) } }
        }
    }

    /// Rooms busiest first (then by name), optionally by prefix, from `offset`.
    public func roomsPage(prefix: String?, offset: Int, limit: Int) -> (rooms: [(room: String, members: Int, users: Int)], total: Int) {
        // Copy the counts under the lock, sort outside it: fan-out never waits for an admin query.
        var all = roomShards.map { $0.rooms.memberCounts() }.flatMap { $0 }
        if let prefix, !prefix.isEmpty { all = all.filter { $0.room.hasPrefix(prefix) } }
        all.sort { $0.members != $1.members ? $0.members > $1.members : $0.room < $1.room }
        return (Array(all.dropFirst(offset).prefix(limit)), all.count)
    }

    /// The members-per-room histogram, maintained on join and leave: O(1) to read, whatever
    /// the number of rooms.
    public func roomSizes() -> RoomSizeHistogram {
        var sizes = RoomSizeHistogram()
        for part in roomShards.map({ $0.rooms.sizes }) { sizes.add(part) }
        return sizes
    }

    /// The busiest rooms, read from each shard's size index (cost independent of the room
    /// count), busiest first, then by name.
    public func busiestRooms(limit: Int) -> [(room: String, members: Int, users: Int)] {
        let all = roomShards.map { $0.rooms.busiestRooms(limit: limit) }.flatMap { $0 }
        return Array(all.sorted { $0.members != $1.members ? $0.members > $1.members : $0.room < $1.room }.prefix(limit))
    }

    public var userCount: Int { userShards.map { $0.directory.userCount }.reduce(0, +) }

    /// Closes the connection with `sid` (admin kick). `false` if there is none.
    public func kick(sid: String, code: UInt16, reason: String) -> Bool {
        guard let (id, shard) = locate(sid: sid) else { return false }
        shard.eventLoop.execute { shard.sink(id)?.close(code: code, reason: reason) }
        return true
    }
}
