/// A Redis Cluster's slot map, read from `CLUSTER SLOTS`: which master serves each of the
/// 16 384 slots.
public struct RedisSlotMap: Sendable, Equatable {
    /// Master of each slot, as an index into `masters`; -1 where no master is known.
    private var owners: [Int16]
    public private(set) var masters: [RedisEndpoint.Address]
    /// Every node the map names (masters and replicas): where to ask next time.
    public private(set) var nodes: [RedisEndpoint.Address]

    /// Redis Cluster's own ceiling (its specification: up to 1 000 nodes): the map keeps no more.
    static let maxNodes = 1_000

    public init() {
        owners = Array(repeating: -1, count: RedisHashSlot.count)
        masters = []
        nodes = []
    }

    /// One node owning every slot: a Redis that is not a cluster.
    public init(single: RedisEndpoint.Address) {
        owners = Array(repeating: 0, count: RedisHashSlot.count)
        masters = [single]
        nodes = [single]
    }

    /// From a `CLUSTER SLOTS` reply: `[[start, end, [host, port, id, …], replica…], …]`. An empty
    /// host means the node that answered (`answeredBy`). Nil when malformed.
    public init?(clusterSlots reply: RESPValue, answeredBy: RedisEndpoint.Address) {
        self.init()
        guard let ranges = reply.elements else { return nil }
        for range in ranges {
            guard let items = range.elements, items.count >= 3, let start = items[0].int, let end = items[1].int,
                start >= 0, end >= start, end < Int64(RedisHashSlot.count)
            else { return nil }
            var addresses: [RedisEndpoint.Address] = []
            for node in items[2...] {
                guard let parts = node.elements, parts.count >= 2, let host = parts[0].string, let port = parts[1].int,
                    (1...65535).contains(port)
                else { return nil }
                let address = RedisEndpoint.Address(host: host.isEmpty || host == "?" ? answeredBy.host : host, port: Int(port))
                addresses.append(address)
            }
            guard let master = addresses.first, let index = masterIndex(master) else { return nil }
            for slot in Int(start)...Int(end) { owners[slot] = Int16(index) }
            for address in addresses where !nodes.contains(address) && nodes.count < Self.maxNodes { nodes.append(address) }
        }
    }

    /// The master's index, added if new; nil past `maxNodes` masters (a reply that names more is
    /// not a cluster's).
    private mutating func masterIndex(_ address: RedisEndpoint.Address) -> Int? {
        if let i = masters.firstIndex(of: address) { return i }
        guard masters.count < Self.maxNodes else { return nil }
        masters.append(address)
        if !nodes.contains(address), nodes.count < Self.maxNodes { nodes.append(address) }
        return masters.count - 1
    }

    public func owner(of slot: Int) -> RedisEndpoint.Address? {
        guard slot >= 0, slot < owners.count else { return nil }
        let index = Int(owners[slot])
        return index >= 0 && index < masters.count ? masters[index] : nil
    }

    /// Whether every slot has a master.
    public var coversEverySlot: Bool { !owners.contains(-1) }

    /// A `MOVED` answer: `slot` is now served by `address`.
    public mutating func move(slot: Int, to address: RedisEndpoint.Address) {
        guard slot >= 0, slot < owners.count, let index = masterIndex(address) else { return }
        owners[slot] = Int16(index)
    }
}
