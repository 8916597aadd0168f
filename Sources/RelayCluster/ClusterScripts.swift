/// The Lua scripts that keep cluster presence consistent in Redis (each runs atomically, on
/// the keys of one hash slot: Redis Cluster safe; no script names a key it is not given).
///
/// Keys: `relay:presence:{room}` (hash `node\u{1F}user` → devices on that node) and
/// `relay:presence-users:{room}` (hash `user` → devices on all nodes), one slot per room;
/// `relay:node-rooms:{node}` (set of rooms a node has presence in: written only by that node
/// and by the sweeper of a dead node, with plain SADD/SREM); `relay:nodes` (sorted set: node →
/// last heartbeat, Redis time); `relay:user-rooms:{user}` (hash `room\u{1F}node` → the user's
/// devices in that room on that node, each field written only by its node (and the sweeper):
/// the rooms of the presence API are its fields' rooms).
///
/// A presence change is three steps, sent in this order (pipelined; in a cluster only each
/// key's own order is kept, which is the order that matters under concurrency):
/// `SADD relay:node-rooms:{node}` (when the node has devices), the `updatePresence` script (the
/// room's before/after, atomic), then `HSET`/`HDEL relay:user-rooms:{user} room\u{1F}node`.
package enum ClusterScripts {
    /// Sets one node's device count for a user in a room; returns {before, after, HGETALL users}.
    /// KEYS: presence, presence-users (one room). ARGV: node, user, devices.
    package static let updatePresence = """
        local field = ARGV[1] .. '\\31' .. ARGV[2]
        local old = tonumber(redis.call('HGET', KEYS[1], field) or '0')
        local new = tonumber(ARGV[3])
        if new > 0 then
          redis.call('HSET', KEYS[1], field, new)
        else
          redis.call('HDEL', KEYS[1], field)
        end
        local before = tonumber(redis.call('HGET', KEYS[2], ARGV[2]) or '0')
        local after = before + (new - old)
        if after > 0 then
          redis.call('HSET', KEYS[2], ARGV[2], after)
        else
          redis.call('HDEL', KEYS[2], ARGV[2])
        end
        return {before, after, redis.call('HGETALL', KEYS[2])}
        """

    /// Removes a dead node's entries from one room. KEYS: presence, presence-users (one room).
    /// ARGV: node. Returns {user, gone, …}: every user the node had there, `gone` 1 when the
    /// user is no longer present on any node (the caller removes the users' `room\u{1F}node`
    /// fields from their `relay:user-rooms:{user}`, one slot per user).
    package static let sweepRoom = """
        local out = {}
        local prefix = ARGV[1] .. '\\31'
        for _, f in ipairs(redis.call('HKEYS', KEYS[1])) do
          if string.sub(f, 1, #prefix) == prefix then
            local user = string.sub(f, #prefix + 1)
            local n = tonumber(redis.call('HGET', KEYS[1], f)) or 0
            redis.call('HDEL', KEYS[1], f)
            local t = tonumber(redis.call('HGET', KEYS[2], user) or '0') - n
            table.insert(out, user)
            if t > 0 then
              redis.call('HSET', KEYS[2], user, t)
              table.insert(out, 0)
            else
              redis.call('HDEL', KEYS[2], user)
              table.insert(out, 1)
            end
          end
        end
        return out
        """

    /// Heartbeat with Redis's own clock (no skew between nodes); returns the nodes whose last
    /// heartbeat is older than ARGV[2] ms. KEYS: `relay:nodes`. ARGV: node, TTL ms.
    package static let heartbeat = """
        local t = redis.call('TIME')
        local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
        redis.call('ZADD', KEYS[1], now, ARGV[1])
        return redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now - tonumber(ARGV[2]))
        """
}
