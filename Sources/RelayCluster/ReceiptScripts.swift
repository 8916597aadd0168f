/// The Lua script of one replication round (see `ReceiptReplicator`). Its keys share one hash
/// slot — the stream keeps its name, `relay:receipts`, and the others carry it as their hash
/// tag — so it runs on Redis Cluster too.
package enum ReceiptScripts {
    package static let stream = "relay:receipts"
    /// A random token; a new one means a node found that Redis lost receipts it had accepted.
    package static let epoch = "{relay:receipts}:epoch"
    /// The replay floor of the current epoch: a stream id every live node had read up to.
    package static let from = "{relay:receipts}:from"
    /// Hash: node → its push counter (entries it added).
    package static let seq = "{relay:receipts}:seq"
    /// Hash: node → the stream id it has read and committed to its own database.
    package static let pos = "{relay:receipts}:pos"

    package static var keys: [String] { [epoch, from, seq, pos, stream] }

    /// KEYS: epoch, from, seq, pos, stream. ARGV: node, the epoch the node knows (`''`: none),
    /// the push counter it expects, the position it last published (`''`: none), its read
    /// position, its replay floor, a fresh random token, the stream's MAXLEN, then (origin, body)
    /// pairs to append.
    ///
    /// Redis lost writes when: the epoch is gone (it restarted empty), this node's counter or
    /// published position went back, or the stream ends below what this node has read. A
    /// replica holds a prefix of its master's writes, and a node's counter is written with the
    /// entries it counts (one script), so a counter that went back means those entries are gone. The node then declares a new epoch with its floor and nothing is appended:
    /// `{'lost', epoch, from, seq, pos, top}`. A node that sees an epoch it does not know learns
    /// of a loss another node found: `{'changed', epoch, from, seq, pos, top}` — unless it had
    /// read less than that floor (it was not counted in it), then it declares again with its own.
    /// Otherwise the script publishes the node's read position, counts and appends the entries:
    /// `{'ok', epoch, seq, id…}`.
    package static let round = """
        local function parse(id)
          local ms, sq = string.match(id or '', '^(%d+)%-(%d+)$')
          if not ms then return nil end
          return tonumber(ms), tonumber(sq)
        end
        local function less(a, b)
          local am, as = parse(a)
          local bm, bs = parse(b)
          if not am or not bm then return false end
          return am < bm or (am == bm and as < bs)
        end
        local function top()
          local last = redis.call('XREVRANGE', KEYS[5], '+', '-', 'COUNT', 1)
          if #last == 0 then return '0-0' end
          return last[1][1]
        end
        local function declare()
          redis.call('SET', KEYS[1], ARGV[7])
          redis.call('SET', KEYS[2], ARGV[6])
          return ARGV[7]
        end
        local node, known = ARGV[1], ARGV[2]
        local cur = redis.call('GET', KEYS[1])
        local s = tonumber(redis.call('HGET', KEYS[3], node) or '0') or 0
        local p = redis.call('HGET', KEYS[4], node) or ''
        if not cur then
          if known ~= '' then
            return {'lost', declare(), ARGV[6], s, p, top()}
          end
          redis.call('SET', KEYS[1], ARGV[7])
          redis.call('DEL', KEYS[2])
          cur = ARGV[7]
        elseif known ~= '' and cur ~= known then
          local from = redis.call('GET', KEYS[2]) or ''
          if less(ARGV[5], from) then
            return {'lost', declare(), ARGV[6], s, p, top()}
          end
          return {'changed', cur, from, s, p, top()}
        end
        local t = top()
        if s < (tonumber(ARGV[3]) or 0) or (ARGV[4] ~= '' and (p == '' or less(p, ARGV[4]))) or less(t, ARGV[5]) then
          return {'lost', declare(), ARGV[6], s, p, t}
        end
        redis.call('HSET', KEYS[4], node, ARGV[5])
        local out = {'ok', cur, s}
        local n = math.floor((#ARGV - 8) / 2)
        if n > 0 then
          out[3] = redis.call('HINCRBY', KEYS[3], node, n)
          for i = 0, n - 1 do
            out[#out + 1] = redis.call('XADD', KEYS[5], 'MAXLEN', '~', ARGV[8], '*', 'o', ARGV[9 + 2 * i], 'r', ARGV[10 + 2 * i])
          end
        end
        return out
        """
}
