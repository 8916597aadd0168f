import NIOCore

/// The pub/sub side of a `RedisClient`: the channels it keeps subscribed (across reconnects and
/// topology changes), the master each is subscribed on now, which ones that master confirmed,
/// and who waits for a confirmation. Bookkeeping only: the client writes the commands it plans.
/// Touched only on the client's event loop.
struct RedisSubscriptions {
    /// Channels moved or subscribed anew, and given up, per master.
    struct Placement {
        var subscribe: [RedisEndpoint.Address: [String]] = [:]
        var unsubscribe: [RedisEndpoint.Address: [String]] = [:]
    }

    /// Every channel kept subscribed.
    private(set) var channels: Set<String> = []
    /// Where each channel is subscribed now (the master that owned its slot then).
    private var subscribedOn: [String: RedisEndpoint.Address] = [:]
    /// Channels the server confirmed on the current link.
    private var confirmed: Set<String> = []
    private var waiters: [String: [EventLoopPromise<Void>]] = [:]

    /// Adds `names`; returns those not kept before.
    mutating func add(_ names: [String]) -> [String] {
        names.filter { channels.insert($0).inserted }
    }

    /// Removes `names`; returns, per master, those subscribed there (to unsubscribe).
    mutating func remove(_ names: [String]) -> [RedisEndpoint.Address: [String]] {
        var byLink: [RedisEndpoint.Address: [String]] = [:]
        for name in names where channels.remove(name) != nil {
            // Not confirmed any more from now: a subscription made again must be confirmed anew.
            confirmed.remove(name)
            if let address = subscribedOn.removeValue(forKey: name) { byLink[address, default: []].append(name) }
        }
        return byLink
    }

    func isConfirmed(_ name: String) -> Bool { confirmed.contains(name) }

    /// `promise` is completed when the server confirms `name`.
    mutating func wait(for name: String, _ promise: EventLoopPromise<Void>) {
        waiters[name, default: []].append(promise)
    }

    /// Where `names` go: each to the master that owns its slot now (`owner`; `nil` when that
    /// master has no live link: left for later), leaving the one it was on if that moved.
    mutating func place(_ names: [String], owner: (String) -> RedisEndpoint.Address?) -> Placement {
        var plan = Placement()
        for name in names {
            guard let owner = owner(name) else { continue }
            if let current = subscribedOn[name] {
                if current == owner { continue }
                plan.unsubscribe[current, default: []].append(name)
            }
            subscribedOn[name] = owner
            confirmed.remove(name)
            plan.subscribe[owner, default: []].append(name)
        }
        return plan
    }

    /// The link to `address` is gone (closed, or no longer a master's): nothing is subscribed
    /// there any more.
    mutating func forget(_ address: RedisEndpoint.Address) {
        for (channel, on) in subscribedOn where on == address {
            subscribedOn.removeValue(forKey: channel)
            confirmed.remove(channel)
        }
    }

    /// `address` confirmed `channel`; returns who waited for it (nothing for a master the
    /// channel has moved away from).
    mutating func confirm(_ channel: String, on address: RedisEndpoint.Address) -> [EventLoopPromise<Void>] {
        guard subscribedOn[channel] == address else { return [] }
        confirmed.insert(channel)
        return waiters.removeValue(forKey: channel) ?? []
    }

    /// `address` dropped `channel` unasked (its slot moved to another master); returns whether
    /// the channel is still wanted, so where its slot went must be found.
    mutating func dropped(_ channel: String, on address: RedisEndpoint.Address) -> Bool {
        guard subscribedOn[channel] == address else { return false }
        confirmed.remove(channel)
        subscribedOn.removeValue(forKey: channel)
        return channels.contains(channel)
    }

    /// `names` in groups one (S)SUBSCRIBE may carry: one slot each for sharded pub/sub in a
    /// cluster, else one group. Grouped once: a resubscription after a failover may carry every
    /// channel of the node.
    static func commandGroups(_ names: [String], bySlot: Bool) -> [[String]] {
        guard bySlot else { return names.isEmpty ? [] : [names.sorted()] }
        let grouped = Dictionary(grouping: names, by: { RedisHashSlot.slot(of: $0) })
        return grouped.keys.sorted().compactMap { grouped[$0]?.sorted() }
    }
}
