/// The Lua scripts that keep cluster presence consistent in Redis (each runs atomically).
///
/// Keys: `relay:presence:{room}` (hash `node\u{1F}user` → devices on that node),
/// `relay:presence-users:{room}` (hash `user` → devices on all nodes), `relay:node-rooms:{node}`
/// (set of rooms a node has presence in), `relay:nodes` (sorted set: node → last heartbeat, Redis time),
/// `relay:user-rooms:{user}` (hash `room` → the user's devices in it on all nodes; the rooms of
/// the presence API, kept with `relay:presence-users:{room}`).
package enum ClusterScripts {
    /// Sets one node's device count for a user in a room; returns {before, after, HGETALL users}.
    package static let updatePresence = """
        local field = ARGV[1] .. '\\31' .. ARGV[2]
        local old = tonumber(redis.call('HGET', KEYS[1], field) or '0')
        local new = tonumber(ARGV[3])
        if new > 0 then
          redis.call('HSET', KEYS[1], field, new)
          redis.call('SADD', KEYS[3], ARGV[4])
        else
          redis.call('HDEL', KEYS[1], field)
        end
        local before = tonumber(redis.call('HGET', KEYS[2], ARGV[2]) or '0')
        local after = before + (new - old)
        if after > 0 then
          redis.call('HSET', KEYS[2], ARGV[2], after)
          redis.call('HSET', KEYS[4], ARGV[4], after)
        else
          redis.call('HDEL', KEYS[2], ARGV[2])
          redis.call('HDEL', KEYS[4], ARGV[4])
        end
        return {before, after, redis.call('HGETALL', KEYS[2])}
        """

    /// Removes a dead node's entries from one room (ARGV[2]); returns the users no longer present
    /// anywhere. The users' `relay:user-rooms:{user}` keys are named here, one per swept user.
    package static let sweepRoom = """
        local gone = {}
        local prefix = ARGV[1] .. '\\31'
        for _, f in ipairs(redis.call('HKEYS', KEYS[1])) do
          if string.sub(f, 1, #prefix) == prefix then
            local user = string.sub(f, #prefix + 1)
            local n = tonumber(redis.call('HGET', KEYS[1], f))
            redis.call('HDEL', KEYS[1], f)
            local t = tonumber(redis.call('HGET', KEYS[2], user) or '0') - n
            local rooms = 'relay:user-rooms:{' .. user .. '}'
            if t > 0 then
              redis.call('HSET', KEYS[2], user, t)
              redis.call('HSET', rooms, ARGV[2], t)
            else
              redis.call('HDEL', KEYS[2], user)
              redis.call('HDEL', rooms, ARGV[2])
              table.insert(gone, user)
            end
          end
        end
        return gone
        """

    /// Heartbeat with Redis's own clock (no skew between nodes); returns the nodes whose last
    /// heartbeat is older than ARGV[2] ms.
    package static let heartbeat = """
        local t = redis.call('TIME')
        local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
        redis.call('ZADD', KEYS[1], now, ARGV[1])
        return redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now - tonumber(ARGV[2]))
        """
}
