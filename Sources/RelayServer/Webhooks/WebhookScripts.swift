/// The Lua scripts that decide, cluster-wide and atomically, which node sends a user's (or a
/// room's) first/last webhook (docs/PROTOCOL.md §13). Each runs atomically in Redis; exactly
/// one call sees a count go 0 → 1 or 1 → 0, and that node sends the event.
///
/// Keys: `relay:wh:user:{user}` and `relay:wh:room:{room}` (hash: `n:<node>` → 1 while that
/// node has the user's sockets / the room's members, `total` → how many nodes, `since` → when
/// the total left 0, Redis time in ms); `relay:wh:node-users:<node>` and
/// `relay:wh:node-rooms:<node>` (sets: what a node holds, for the sweep of a dead node).
enum WebhookScripts {
    static func userKey(_ user: String) -> String { "relay:wh:user:{\(user)}" }
    static func roomKey(_ room: String) -> String { "relay:wh:room:{\(room)}" }
    static let userKeyPrefix = "relay:wh:user:{"
    static let roomKeyPrefix = "relay:wh:room:{"
    static func nodeUsers(_ node: String) -> String { "relay:wh:node-users:\(node)" }
    static func nodeRooms(_ node: String) -> String { "relay:wh:node-rooms:\(node)" }

    /// KEYS: the hash, the node's set. ARGV: node, member, 1 (present) or 0 (gone).
    /// Returns {before, after, since, now}: nodes holding the member before and after, when it
    /// became present (ms), Redis's clock (ms).
    static let setPresent = """
        local t = redis.call('TIME')
        local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
        local field = 'n:' .. ARGV[1]
        local old = tonumber(redis.call('HGET', KEYS[1], field) or '0')
        local new = tonumber(ARGV[3])
        local before = tonumber(redis.call('HGET', KEYS[1], 'total') or '0')
        local since = tonumber(redis.call('HGET', KEYS[1], 'since') or now)
        local after = before + (new - old)
        if after < 0 then after = 0 end
        if new > 0 then
          redis.call('HSET', KEYS[1], field, new)
          redis.call('SADD', KEYS[2], ARGV[2])
        else
          redis.call('HDEL', KEYS[1], field)
          redis.call('SREM', KEYS[2], ARGV[2])
        end
        if after > 0 then
          if before == 0 then since = now; redis.call('HSET', KEYS[1], 'since', now) end
          redis.call('HSET', KEYS[1], 'total', after)
        else
          redis.call('DEL', KEYS[1])
        end
        return {before, after, since, now}
        """

    /// Removes up to ARGV[3] members of a (dead) node's set. KEYS: the node's set. ARGV: node,
    /// key prefix (`relay:wh:user:{`), count. Returns {member, msPresent, now, …} for each
    /// member no node holds any more, and the members left in the set as the last element.
    static let sweepChunk = """
        local t = redis.call('TIME')
        local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
        local out = {}
        local field = 'n:' .. ARGV[1]
        local members = redis.call('SPOP', KEYS[1], tonumber(ARGV[3]))
        for _, m in ipairs(members) do
          local key = ARGV[2] .. m .. '}'
          local n = tonumber(redis.call('HGET', key, field) or '0')
          if n > 0 then
            redis.call('HDEL', key, field)
            local total = tonumber(redis.call('HGET', key, 'total') or '0') - 1
            if total > 0 then
              redis.call('HSET', key, 'total', total)
            else
              local since = tonumber(redis.call('HGET', key, 'since') or now)
              redis.call('DEL', key)
              table.insert(out, m)
              table.insert(out, now - since)
            end
          end
        end
        table.insert(out, redis.call('SCARD', KEYS[1]))
        return out
        """
}
