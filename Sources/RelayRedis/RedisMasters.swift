/// What a `RedisClient` knows of the masters it routes to: the slot map, whether that map was
/// read since the last master was lost, and what kind of deployment answered. Touched only on
/// the client's event loop.
struct RedisMasters {
    var slotMap = RedisSlotMap()
    /// The map was read since the last master was lost: a map from before is not trusted, even
    /// when links to the same addresses are up again (a Redis restarted empty on the same ports
    /// is not the cluster that map described).
    var confirmed = false
    var topology = RedisClient.Topology.unknown
}
