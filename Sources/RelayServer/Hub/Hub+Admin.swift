import Logging
import NIOConcurrencyHelpers
import NIOCore
import RelayCore

/// What the admin API reads and does.
extension Hub {
    // MARK: Admin helpers

    /// Where a public `sid` lives, for admin lookups and kicks.
    public func locate(sid: String) -> (ConnectionID, LoopShard)? {
        state.withLockedValue { $0.sids[sid] }.map { ($0.0, shards[$0.1]) }
    }

    /// A user's connections with their rooms, for the admin API.
    public func connections(of user: String) -> [(ConnectionInfo, [String])] {
        state.withLockedValue { s in
            s.directory.connections(of: user).compactMap { id in
                s.info[id].map { ($0, s.rooms.rooms(of: id).sorted()) }
            }
        }
    }

    /// Rooms busiest first (then by name), optionally by prefix, from `offset`.
    public func roomsPage(prefix: String?, offset: Int, limit: Int) -> (rooms: [(room: String, members: Int, users: Int)], total: Int) {
        state.withLockedValue { s in
            var all = s.rooms.busiestRooms(limit: Int.max)
            if let prefix, !prefix.isEmpty { all = all.filter { $0.room.hasPrefix(prefix) } }
            let page = all.dropFirst(offset).prefix(limit).map { ($0.room, $0.members, s.rooms.presence(room: $0.room).count) }
            return (Array(page), all.count)
        }
    }

    /// Member counts of every room (the members-per-room histogram).
    public func roomSizes() -> [Int] {
        state.withLockedValue { s in s.rooms.busiestRooms(limit: Int.max).map(\.members) }
    }

    public var userCount: Int { state.withLockedValue { $0.directory.userCount } }

    /// Closes the connection with `sid` (admin kick). `false` if there is none.
    public func kick(sid: String, code: UInt16, reason: String) -> Bool {
        guard let (id, shard) = locate(sid: sid) else { return false }
        shard.eventLoop.execute { shard.sink(id)?.close(code: code, reason: reason) }
        return true
    }
}
