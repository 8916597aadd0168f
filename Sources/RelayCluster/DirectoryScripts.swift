/// The Lua scripts of the cluster's user directory (each runs atomically, on the keys of one
/// user's hash slot: Redis Cluster safe; no script names a key it is not given): who is online
/// on which node, and when each user last disconnected, for the presence API and emit answers.
///
/// Keys: `relay:directory:{user}` (hash: `n:<node>` → the user's sockets on that node, `seen` →
/// the last disconnect, ms, Redis time; it expires `retention` ms after the user's last socket
/// anywhere went away), `relay:node-users:{node}` (set of users a node has sockets of, for the
/// sweep of a dead node: written only by that node and by the sweeper, with plain SADD/SREM,
/// SADD before the user's script, SREM after it). A user's rooms are
/// `relay:user-rooms:{user}` (ClusterScripts), in the user's slot too.
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

    /// KEYS: directory. ARGV: node, sockets on the node, '1' for a disconnect, retention ms.
    package static let updateUser = prelude + """
        local field = 'n:' .. ARGV[1]
        local n = tonumber(ARGV[2])
        if n > 0 then
          redis.call('HSET', KEYS[1], field, n)
        else
          redis.call('HDEL', KEYS[1], field)
        end
        if ARGV[3] == '1' then seen(KEYS[1], nowMs()) end
        settle(KEYS[1], ARGV[4])
        return 1
        """

    /// A node's sockets of one user are gone (a dead node's sweep, or a restatement that no
    /// longer has the user). KEYS: directory, user-rooms (one user). ARGV: node, retention ms,
    /// '1' to drop the node's `room\u{1F}node` fields of the user's rooms too. The user's last
    /// seen becomes now when the node had sockets.
    package static let dropNode = prelude + """
        local field = 'n:' .. ARGV[1]
        if redis.call('HDEL', KEYS[1], field) == 1 then seen(KEYS[1], nowMs()) end
        settle(KEYS[1], ARGV[2])
        if ARGV[3] == '1' then
          local suffix = '\\31' .. ARGV[1]
          for _, f in ipairs(redis.call('HKEYS', KEYS[2])) do
            if #f > #suffix and string.sub(f, -#suffix) == suffix then redis.call('HDEL', KEYS[2], f) end
          end
        end
        return 1
        """
}
