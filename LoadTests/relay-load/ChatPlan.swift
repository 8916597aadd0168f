/// Who is in which room in the `chat` scenario: the same for every run with the same options
/// and seed, whatever the server or the machine.
///
/// Every user gets `roomsPerUser` slots; the slots are shuffled and cut into rooms whose sizes
/// are drawn from the size distribution, so each user ends up in `roomsPerUser` rooms (a few in
/// one fewer, where a room would have held the same user twice) and the room sizes follow the
/// distribution (by number of rooms).
struct ChatPlan {
    let users: Int
    let devices: Int
    /// Members (user numbers) of each room.
    let roomMembers: [[Int32]]
    /// Rooms (room numbers) of each user, ascending.
    let userRooms: [[Int32]]

    static func roomName(_ room: Int32) -> String { "chat-\(room)" }
    static func userName(_ user: Int) -> String { "user-\(user)" }

    /// `sizes`: (room size, weight by number of rooms), sizes ≥ 2.
    init(users: Int, devices: Int, roomsPerUser: Int, sizes: [(size: Int, weight: Double)], seed: UInt64) {
        self.users = users
        self.devices = devices
        var rng = SplitMix64(seed: seed)
        var slots: [Int32] = []
        slots.reserveCapacity(users * roomsPerUser)
        for u in 0..<users { for _ in 0..<roomsPerUser { slots.append(Int32(u)) } }
        rng.shuffle(&slots)
        let totalWeight = sizes.reduce(0) { $0 + $1.weight }
        var rooms: [[Int32]] = []
        var i = 0
        while slots.count - i >= 2 {
            var pick = rng.unit() * totalWeight
            var size = sizes.last?.size ?? 2
            for s in sizes {
                pick -= s.weight
                if pick < 0 {
                    size = s.size
                    break
                }
            }
            size = min(size, slots.count - i)
            var room: [Int32] = []
            room.reserveCapacity(size)
            // Take the next `size` slots; a user already in the room swaps with a later slot
            // of another user (or, with none left, loses that slot).
            var j = i
            while room.count < size && j < slots.count {
                if room.contains(slots[j]) {
                    var k = j + 1
                    while k < slots.count && room.contains(slots[k]) { k += 1 }
                    if k == slots.count {
                        j += 1
                        continue
                    }
                    slots.swapAt(j, k)
                }
                room.append(slots[j])
                j += 1
            }
            i = j
            if room.count >= 2 { rooms.append(room) }
        }
        var byUser = Array(repeating: [Int32](), count: users)
        for (r, members) in rooms.enumerated() {
            for u in members { byUser[Int(u)].append(Int32(r)) }
        }
        roomMembers = rooms
        userRooms = byUser
    }

    var sockets: Int { users * devices }

    /// Rooms per size, ascending by size.
    var sizeHistogram: [(size: Int, rooms: Int)] {
        var counts: [Int: Int] = [:]
        for r in roomMembers { counts[r.count, default: 0] += 1 }
        return counts.sorted { $0.key < $1.key }.map { ($0.key, $0.value) }
    }

    /// Parses `SIZE:WEIGHT,…` (e.g. `2:60,3:10,20:1`).
    static func parseSizes(_ text: String) -> [(size: Int, weight: Double)]? {
        var out: [(size: Int, weight: Double)] = []
        for part in text.split(separator: ",") {
            let kv = part.split(separator: ":")
            guard kv.count == 2, let size = Int(kv[0]), let weight = Double(kv[1]), size >= 2, size <= 10_000, weight > 0, weight.isFinite else { return nil }
            out.append((size, weight))
        }
        return out.isEmpty ? nil : out
    }
}

/// A small seeded generator (SplitMix64): the plan, the schedules and the churn are the same for
/// the same seed on every platform (the standard library's generator is not seedable).
struct SplitMix64: RandomNumberGenerator {
    private var state: UInt64

    init(seed: UInt64) { state = seed }

    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    /// Uniform in [0, 1).
    mutating func unit() -> Double { Double(next() >> 11) / Double(1 << 53) }

    /// Uniform in 0..<n (n > 0).
    mutating func below(_ n: Int) -> Int { Int(next() % UInt64(n)) }

    /// Fisher–Yates with this generator (the standard library's `shuffle(using:)` does not
    /// promise the same order across versions).
    mutating func shuffle<T>(_ a: inout [T]) {
        guard a.count > 1 else { return }
        for i in stride(from: a.count - 1, to: 0, by: -1) { a.swapAt(i, below(i + 1)) }
    }
}
