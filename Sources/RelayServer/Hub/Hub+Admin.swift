import RelayCore

/// What the admin API looks up and does across services: a socket by sid, a user's
/// connections with their rooms, a kick.
extension Hub {
    /// Where a public `sid` lives, for admin lookups and kicks.
    public func locate(sid: String) -> (ConnectionID, LoopPartition)? {
        registry.locate(sid: sid).map { ($0.0, partitions[$0.1]) }
    }

    /// A user's connections with their rooms, for the admin API.
    public func connections(of user: String) -> [(ConnectionInfo, [String])] {
        registry.connections(of: user).ids.compactMap { id in
            registry.info(of: id).map { ($0, rooms.rooms(of: id).sorted()) }
        }
    }

    /// Closes the connection with `sid` (admin kick). `false` if there is none.
    public func kick(sid: String, code: UInt16, reason: String) -> Bool {
        guard let (id, partition) = locate(sid: sid) else { return false }
        partition.eventLoop.execute { partition.sink(id)?.close(code: code, reason: reason) }
        return true
    }
}
