import RelayCore

/// The admin API's views of the rooms: each stripe's answer copied under its lock, merged and
/// sorted outside it, so a fan-out never waits for an admin query.
extension RoomDirectory {
    /// Rooms busiest first (then by name), optionally by prefix, from `offset`.
    func roomsPage(prefix: String?, offset: Int, limit: Int) -> (rooms: [(room: String, members: Int, users: Int)], total: Int) {
        var all = rooms.map { $0.memberCounts() }.flatMap { $0 }
        if let prefix, !prefix.isEmpty { all = all.filter { $0.room.hasPrefix(prefix) } }
        all.sort { $0.members != $1.members ? $0.members > $1.members : $0.room < $1.room }
        return (Array(all.dropFirst(offset).prefix(limit)), all.count)
    }

    /// The members-per-room histogram, maintained on join and leave: O(1) per stripe to read,
    /// whatever the number of rooms.
    func roomSizes() -> RoomSizeHistogram {
        var sizes = RoomSizeHistogram()
        for part in rooms.map({ $0.sizes }) { sizes.add(part) }
        return sizes
    }

    /// The busiest rooms, read from each stripe's size index (cost independent of the room
    /// count), busiest first, then by name.
    func busiestRooms(limit: Int) -> [(room: String, members: Int, users: Int)] {
        let all = rooms.map { $0.busiestRooms(limit: limit) }.flatMap { $0 }
        return Array(all.sorted { $0.members != $1.members ? $0.members > $1.members : $0.room < $1.room }.prefix(limit))
    }
}
