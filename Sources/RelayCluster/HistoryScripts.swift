/// The Lua scripts of Redis history (each runs atomically, on one key: Redis Cluster safe).
///
/// Keys: `relay:history:r:{<room>}` / `relay:history:u:{<user>}` (a stream per room or user:
/// field `e` is the cluster envelope; tagged like the stream's channel `relay:room:{<room>}` /
/// `relay:user:{<user>}`, so the publish script's XADD and SPUBLISH are in one slot),
/// `relay:history-gap` (ms: recovery across this instant is refused, written after this node
/// could not store events; read by `RedisBroker` with its own GET, pipelined with `read`).
package enum HistoryScripts {
    /// XADD the envelope (trimmed by count and age, expiring when idle), then publish
    /// `<id>\n<envelope>` on the stream's channel. Returns the id.
    /// KEYS[1] stream; ARGV: channel (same tag as the stream), maxlen, max age ms, publish
    /// command, envelope.
    package static let publish = """
        local id = redis.call('XADD', KEYS[1], 'MAXLEN', '=', ARGV[2], '*', 'e', ARGV[5])
        local t = redis.call('TIME')
        local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
        redis.call('XTRIM', KEYS[1], 'MINID', '~', tostring(now - tonumber(ARGV[3])))
        redis.call('PEXPIRE', KEYS[1], tonumber(ARGV[3]) * 2)
        redis.call(ARGV[4], ARGV[1], id .. '\\n' .. ARGV[5])
        return id
        """

    /// The events after ARGV[1], at most ARGV[2], if the stream reaches back to it.
    /// Returns {0, head, {{id, {'e', envelope}}, …}, more} or {1} (unavailable).
    /// KEYS[1] stream. (The gap marker is applied by the caller.)
    package static let read = """
        local from = ARGV[1]
        local count = tonumber(ARGV[2])
        if redis.call('EXISTS', KEYS[1]) == 0 then
          if from == '0-0' then return {0, '0-0', {}, 0} end
          return {1}
        end
        local info = redis.call('XINFO', 'STREAM', KEYS[1])
        local head, added, length = '0-0', 0, 0
        for i = 1, #info, 2 do
          if info[i] == 'last-generated-id' then head = info[i + 1] end
          if info[i] == 'entries-added' then added = tonumber(info[i + 1]) end
          if info[i] == 'length' then length = tonumber(info[i + 1]) end
        end
        local entries = redis.call('XRANGE', KEYS[1], from, '+', 'COUNT', count + 2)
        -- Complete after `from`: it is the head, a kept entry, or the start of a stream that
        -- never lost an entry (trimming does not move max-deleted-entry-id; the count does).
        local ok = (from == head) or (from == '0-0' and added == length)
        if #entries > 0 and entries[1][1] == from then
          ok = true
          table.remove(entries, 1)
        end
        if not ok then return {1} end
        local more = 0
        while #entries > count do
          more = 1
          table.remove(entries)
        end
        return {0, head, entries, more}
        """

    /// The stream's newest id (`0-0` when it has none).
    package static let head = """
        if redis.call('EXISTS', KEYS[1]) == 0 then return '0-0' end
        local info = redis.call('XINFO', 'STREAM', KEYS[1])
        for i = 1, #info, 2 do
          if info[i] == 'last-generated-id' then return info[i + 1] end
        end
        return '0-0'
        """
}
