import RelayBackends

/// The Lua scripts that decide, cluster-wide and atomically, which node sends a user's (or a
/// room's) first/last webhook (docs/PROTOCOL.md §13). Each runs atomically in Redis on one
/// key (Redis Cluster safe; no script names a key it is not given); exactly one call sees a
/// count go 0 → 1 or 1 → 0, and that node sends the event.
///
/// Keys: `relay:wh:user:{user}` and `relay:wh:room:{room}` (hash: `n:<node>` → 1 while that
/// node has the user's sockets / the room's members, `total` → how many nodes, `since` → when
/// the total left 0, Redis time in ms); `relay:wh:node-users:{node}` and
/// `relay:wh:node-rooms:{node}` (sets: what a node holds, for the sweep of a dead node; written
/// only by that node and by its sweeper, with plain SADD before the member's script when it
/// becomes present and SREM after it when it is gone, so a sweep never misses a member).
package enum WebhookScripts {
    package static func userKey(_ user: String) -> String { "relay:wh:user:" + ClusterKeys.tag(user) }
    package static func roomKey(_ room: String) -> String { "relay:wh:room:" + ClusterKeys.tag(room) }
    package static func nodeUsers(_ node: String) -> String { "relay:wh:node-users:" + ClusterKeys.tag(node) }
    package static func nodeRooms(_ node: String) -> String { "relay:wh:node-rooms:" + ClusterKeys.tag(node) }

    /// KEYS: the hash. ARGV: node, 1 (present) or 0 (gone).
    /// Returns {before, after, since, now}: nodes holding the member before and after, when it
    /// became present (ms), Redis's clock (ms).
    package static let setPresent = """
        local t = redis.call('TIME')
        local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
        local field = 'n:' .. ARGV[1]
        local old = tonumber(redis.call('HGET', KEYS[1], field) or '0')
        local new = tonumber(ARGV[2])
        local before = tonumber(redis.call('HGET', KEYS[1], 'total') or '0')
        local since = tonumber(redis.call('HGET', KEYS[1], 'since') or now)
        local after = before + (new - old)
        if after < 0 then after = 0 end
        if new > 0 then
          redis.call('HSET', KEYS[1], field, new)
        else
          redis.call('HDEL', KEYS[1], field)
        end
        if after > 0 then
          if before == 0 then since = now; redis.call('HSET', KEYS[1], 'since', now) end
          redis.call('HSET', KEYS[1], 'total', after)
        else
          redis.call('DEL', KEYS[1])
        end
        return {before, after, since, now}
        """

    /// A (dead) node no longer holds one member. KEYS: the member's hash. ARGV: node.
    /// Returns {1, msPresent} when no node holds the member any more (this call removed the
    /// last holder), {0, 0} otherwise (including when the node did not hold it: idempotent).
    package static let sweepMember = """
        local t = redis.call('TIME')
        local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
        local field = 'n:' .. ARGV[1]
        local n = tonumber(redis.call('HGET', KEYS[1], field) or '0')
        if n <= 0 then return {0, 0} end
        redis.call('HDEL', KEYS[1], field)
        local total = tonumber(redis.call('HGET', KEYS[1], 'total') or '0') - 1
        if total > 0 then
          redis.call('HSET', KEYS[1], 'total', total)
          return {0, 0}
        end
        local since = tonumber(redis.call('HGET', KEYS[1], 'since') or now)
        redis.call('DEL', KEYS[1])
        return {1, now - since}
        """

    package static func memberKey(_ kind: PresenceSubject, _ name: String) -> String {
        kind == .user ? userKey(name) : roomKey(name)
    }

    package static func nodeSet(_ kind: PresenceSubject, _ node: String) -> String {
        kind == .user ? nodeUsers(node) : nodeRooms(node)
    }

    /// The commands of one change on `node`, in order: the node's set first when the member
    /// becomes present, the member's script, the node's set last when it is gone.
    package static func setPresentCommands(_ kind: PresenceSubject, _ name: String, node: String, present: Bool) -> (before: [String]?, script: [String], after: [String]?) {
        let set = nodeSet(kind, node)
        return (
            present ? ["SADD", set, name] : nil,
            ["EVAL", setPresent, "1", memberKey(kind, name), node, present ? "1" : "0"],
            present ? nil : ["SREM", set, name]
        )
    }

    package static func sweepMemberCommand(_ kind: PresenceSubject, _ name: String, node: String) -> [String] {
        ["EVAL", sweepMember, "1", memberKey(kind, name), node]
    }
}
