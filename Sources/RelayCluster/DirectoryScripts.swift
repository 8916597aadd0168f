/// The Lua scripts of the cluster's user directory (each runs atomically): who is online on
/// which node, and when each user last disconnected, for the presence API and emit answers.
///
/// Keys: `relay:directory:{user}` (hash: `n:<node>` → the user's sockets on that node, `seen` →
/// the last disconnect, ms, Redis time; it expires `retention` ms after the user's last socket
/// anywhere went away), `relay:node-users:<node>` (set of users a node has sockets of, for the
/// sweep of a dead node). A user's rooms are `relay:user-rooms:{user}` (ClusterScripts).
package enum DirectoryScripts {
    /// The Lua helpers every script starts with: Redis's clock in ms, recording a disconnect,
    /// and keeping (or letting expire) a user's key by whether a node still has their sockets.
    private static let prelude = """
        local function nowMs()
          local t = redis.call('TIME')
          return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
        end
        local function seen(k, now)
          local old = tonumber(redis.call('HGET', k, 'seen') or '0')
          if now > old then redis.call('HSET', k, 'seen', now) end
        end
        local function settle(k, retention)
          for _, f in ipairs(redis.call('HKEYS', k)) do
            if string.sub(f, 1, 2) == 'n:' then
              redis.call('PERSIST', k)
              return
            end
          end
          redis.call('PEXPIRE', k, retention)
        end

        """

    /// KEYS: directory, node-users. ARGV: node, user, sockets on the node, '1' for a disconnect,
    /// retention ms.
    package static let updateUser = prelude + """
        local field = 'n:' .. ARGV[1]
        local n = tonumber(ARGV[3])
        if n > 0 then
          redis.call('HSET', KEYS[1], field, n)
          redis.call('SADD', KEYS[2], ARGV[2])
        else
          redis.call('HDEL', KEYS[1], field)
          redis.call('SREM', KEYS[2], ARGV[2])
        end
        if ARGV[4] == '1' then seen(KEYS[1], nowMs()) end
        settle(KEYS[1], ARGV[5])
        return 1
        """

    /// KEYS: the users' directory keys. Returns {sockets on all nodes, last seen or -1} per key.
    package static let readUsers = """
        local out = {}
        for i, k in ipairs(KEYS) do
          local devices, last = 0, -1
          local all = redis.call('HGETALL', k)
          for j = 1, #all, 2 do
            if all[j] == 'seen' then
              last = tonumber(all[j + 1])
            elseif string.sub(all[j], 1, 2) == 'n:' then
              devices = devices + tonumber(all[j + 1])
            end
          end
          out[i] = {devices, last}
        end
        return out
        """

    /// A dead node's sockets are gone: KEYS: its node-users set. ARGV: node, retention ms. Its
    /// users' directory keys are named here, one per user; their last seen becomes now.
    package static let sweepUsers = prelude + """
        local field = 'n:' .. ARGV[1]
        local now = nowMs()
        for _, user in ipairs(redis.call('SMEMBERS', KEYS[1])) do
          local k = 'relay:directory:{' .. user .. '}'
          if redis.call('HDEL', k, field) == 1 then seen(k, now) end
          settle(k, ARGV[2])
        end
        redis.call('DEL', KEYS[1])
        return 1
        """

    /// This node states its sockets per user again (after Redis came back): KEYS: its
    /// node-users set. ARGV: node, retention ms, then user, count pairs. Users it had and no
    /// longer has are removed (last seen: now; they left while Redis could not be told).
    package static let restateNode = prelude + """
        local field = 'n:' .. ARGV[1]
        local keep = {}
        for i = 3, #ARGV, 2 do keep[ARGV[i]] = true end
        local now = nowMs()
        for _, user in ipairs(redis.call('SMEMBERS', KEYS[1])) do
          if not keep[user] then
            local k = 'relay:directory:{' .. user .. '}'
            if redis.call('HDEL', k, field) == 1 then seen(k, now) end
            settle(k, ARGV[2])
            redis.call('SREM', KEYS[1], user)
          end
        end
        for i = 3, #ARGV, 2 do
          local k = 'relay:directory:{' .. ARGV[i] .. '}'
          redis.call('HSET', k, field, ARGV[i + 1])
          redis.call('SADD', KEYS[1], ARGV[i])
          redis.call('PERSIST', k)
        end
        return 1
        """
}
