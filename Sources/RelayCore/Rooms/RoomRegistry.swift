/// Room membership and presence.
///
/// A room holds connections; presence counts a user once however many devices they have in the
/// room, and a user leaves presence only when their last connection in the room leaves. Each
/// member also records its *partition* (the event loop it lives on) so that fan-out can visit
/// only the partitions that have members, once each.
///
/// The rooms a connection is in (and the limit on them) are `ConnectionRooms`' business: the hub
/// keeps one registry per lock stripe of room names, and a stripe sees only its own rooms.
///
/// **Presence grace**: a connection that dropped may leave a *hold* in each of its rooms until a
/// deadline. A held device still counts in the room's presence (and keeps the room occupied)
/// but receives nothing; the user's next join of the room takes the hold over, so a phone that
/// comes back within the grace never left anyone's presence list. Holds past their deadline are
/// released by `releaseHolds`.
public struct RoomRegistry: Sendable {
    public enum JoinError: Error, Equatable, Sendable {
        case roomFull(limit: Int)
    }

    public struct JoinResult: Equatable, Sendable {
        /// The connection was already in the room; nothing changed.
        public var alreadyMember: Bool
        /// The user had no other device in the room (nor a hold): others should see
        /// `presence:join`.
        public var userBecamePresent: Bool
        /// The user's devices counted in the room's presence before and after (holds included):
        /// equal when the join took over a hold.
        public var devicesBefore: Int = 0
        public var devicesAfter: Int = 0
    }

    public struct LeaveResult: Equatable, Sendable {
        public var room: String
        public var user: String
        /// The user's last device left (no hold left either): others should see
        /// `presence:leave`.
        public var userLeftPresence: Bool
        /// The user's devices counted in the room's presence before and after (holds included):
        /// equal when the leaving device left a hold.
        public var devicesBefore: Int = 1
        public var devicesAfter: Int = 0
    }

    struct Member: Sendable {
        var user: String
        var partition: Int
    }

    struct Room: Sendable {
        var members: [ConnectionID: Member] = [:]
        var devicesByUser: [String: Int] = [:]
        /// The partitions with members, ascending: read by every publish (shared, not
        /// allocated and sorted each time), changed only when a partition gains its first member
        /// or loses its last.
        var partitions: [Int] = []
        /// Members per partition, in `partitions`' order (as many as event loops: a search of
        /// a few entries, no table).
        var partitionCounts: [Int] = []
        /// Where the room is in `roomsBySize[members.count]` while it has members.
        var slot = 0
        /// Dropped devices held in presence (`leave(…holdingUntil:)`): per user, when each hold
        /// ends, ascending.
        var held: [String: [Int64]] = [:]

        /// The user's devices as presence counts them: connected and held.
        func presentDevices(_ user: String) -> Int { (devicesByUser[user] ?? 0) + (held[user]?.count ?? 0) }

        var isEmpty: Bool { members.isEmpty && held.isEmpty }

        /// Every user's devices as presence counts them.
        var presentByUser: [String: Int] {
            guard !held.isEmpty else { return devicesByUser }
            var devices = devicesByUser
            for (user, holds) in held { devices[user, default: 0] += holds.count }
            return devices
        }

        mutating func add(_ member: Member, connection: ConnectionID) -> Int {
            members[connection] = member
            let devices = (devicesByUser[member.user] ?? 0) + 1
            devicesByUser[member.user] = devices
            if let i = partitions.firstIndex(of: member.partition) {
                partitionCounts[i] += 1
            } else {
                let at = partitions.firstIndex { $0 > member.partition } ?? partitions.endIndex
                partitions.insert(member.partition, at: at)
                partitionCounts.insert(1, at: at)
            }
            return devices
        }

        /// What one join did to the room.
        enum JoinOutcome {
            case alreadyMember(devices: Int)
            case full
            /// The user's present devices before and after, the members after, and where the
            /// room was among the rooms of its former size.
            case joined(before: Int, after: Int, members: Int, slot: Int)
        }

        /// What one leave or release did to the room.
        struct LeaveOutcome {
            var user: String
            var before: Int
            var after: Int
            var members: Int
            var isEmpty: Bool
            /// Where the room was among the rooms of its former size.
            var slot: Int
        }

        /// Joins in place (the registry reaches the room once, and never copies it: a copy
        /// retains each of its tables). The user's earliest hold is taken over: the device came
        /// back (or another of the user's).
        mutating func join(_ member: Member, connection: ConnectionID, maxMembers: Int) -> JoinOutcome {
            if members[connection] != nil { return .alreadyMember(devices: presentDevices(member.user)) }
            guard members.count < maxMembers else { return .full }
            let holdIndex = held.index(forKey: member.user)
            let holds = holdIndex.map { held.values[$0].count } ?? 0
            let devices = add(member, connection: connection)
            if let holdIndex {
                if holds > 1 { held.values[holdIndex].removeFirst() } else { held.remove(at: holdIndex) }
            }
            return .joined(before: devices - 1 + holds, after: devices + max(0, holds - 1), members: members.count, slot: slot)
        }

        /// Leaves in place; with `holdingUntil` the device stays in presence until then.
        mutating func leave(_ connection: ConnectionID, holdingUntil: Int64?) -> LeaveOutcome? {
            guard let (member, devices) = remove(connection) else { return nil }
            var holds = 0
            if let i = held.index(forKey: member.user) {
                holds = held.values[i].count
                if let until = holdingUntil {
                    let at = held.values[i].firstIndex { $0 > until } ?? holds
                    held.values[i].insert(until, at: at)
                }
            } else if let until = holdingUntil {
                held[member.user] = [until]
            }
            let after = devices + holds + (holdingUntil == nil ? 0 : 1)
            return LeaveOutcome(user: member.user, before: devices + 1 + holds, after: after, members: members.count, isEmpty: isEmpty, slot: slot)
        }

        /// Ends the user's holds due at `now`; `nil` when none were.
        mutating func releaseHolds(of user: String, now: Int64) -> LeaveOutcome? {
            guard let i = held.index(forKey: user), let first = held.values[i].first, first <= now else { return nil }
            let devices = devicesByUser[user] ?? 0
            let holds = held.values[i].count
            let due = held.values[i].prefix { $0 <= now }.count
            if due == holds { held.remove(at: i) } else { held.values[i].removeFirst(due) }
            return LeaveOutcome(user: user, before: devices + holds, after: devices + holds - due, members: members.count, isEmpty: isEmpty, slot: slot)
        }

        mutating func remove(_ connection: ConnectionID) -> (member: Member, devices: Int)? {
            guard let member = members.removeValue(forKey: connection) else { return nil }
            let devices = (devicesByUser[member.user] ?? 1) - 1
            if devices <= 0 { devicesByUser.removeValue(forKey: member.user) } else { devicesByUser[member.user] = devices }
            if let i = partitions.firstIndex(of: member.partition) {
                if partitionCounts[i] > 1 {
                    partitionCounts[i] -= 1
                } else {
                    partitions.remove(at: i)
                    partitionCounts.remove(at: i)
                }
            }
            return (member, devices)
        }
    }

    public var maxMembersPerRoom: Int
    private var rooms: [String: Room] = [:]
    /// Members per room, maintained on every join and leave.
    public private(set) var sizes = RoomSizeHistogram()
    /// Rooms by member count, and the counts present in descending order: the busiest rooms
    /// are read without walking every room. Indexed by size (grown to the largest seen), each
    /// room at its `slot`: a join or leave moves it with two array writes, where sets of names
    /// hashed it twice and rehashed its neighbours on removal.
    private var roomsBySize: [[String]] = []
    private var distinctSizes: [Int] = []

    public init(maxMembersPerRoom: Int = 10_000) {
        self.maxMembersPerRoom = maxMembersPerRoom
    }

    public var roomCount: Int { rooms.count }

    public mutating func join(room: String, connection: ConnectionID, user: String, partition: Int) throws(JoinError) -> JoinResult {
        let member = Member(user: user, partition: partition)
        let index = rooms.index(forKey: room)
        var fresh = Room()
        let outcome = index.map { rooms.values[$0].join(member, connection: connection, maxMembers: maxMembersPerRoom) }
            ?? fresh.join(member, connection: connection, maxMembers: maxMembersPerRoom)
        switch outcome {
        case .alreadyMember(let devices):
            return JoinResult(alreadyMember: true, userBecamePresent: false, devicesBefore: devices, devicesAfter: devices)
        case .full:
            throw .roomFull(limit: maxMembersPerRoom)
        case .joined(let before, let after, let count, let slot):
            let (newSlot, moved) = resized(room, slot: slot, from: count - 1, to: count)
            if let index {
                rooms.values[index].slot = newSlot
            } else {
                fresh.slot = newSlot
                rooms[room] = fresh
            }
            if let moved { rooms[moved.room]?.slot = moved.slot }
            return JoinResult(alreadyMember: false, userBecamePresent: before == 0, devicesBefore: before, devicesAfter: after)
        }
    }

    /// Removes a connection from a room; `nil` if it was not a member. With `holdingUntil`, the
    /// device stays in the room's presence until then (a dropped connection within the
    /// presence grace).
    public mutating func leave(room: String, connection: ConnectionID, holdingUntil: Int64? = nil) -> LeaveResult? {
        guard let index = rooms.index(forKey: room), let left = rooms.values[index].leave(connection, holdingUntil: holdingUntil) else { return nil }
        let (newSlot, moved) = resized(room, slot: left.slot, from: left.members + 1, to: left.members)
        if left.isEmpty { rooms.remove(at: index) } else { rooms.values[index].slot = newSlot }
        if let moved { rooms[moved.room]?.slot = moved.slot }
        return LeaveResult(room: room, user: left.user, userLeftPresence: left.after == 0, devicesBefore: left.before, devicesAfter: left.after)
    }

    /// Releases the user's holds in the room that end at or before `now`; `nil` when none did.
    public mutating func releaseHolds(room: String, user: String, now: Int64) -> LeaveResult? {
        guard let index = rooms.index(forKey: room), let released = rooms.values[index].releaseHolds(of: user, now: now) else { return nil }
        if released.isEmpty { rooms.remove(at: index) }
        return LeaveResult(room: room, user: user, userLeftPresence: released.after == 0, devicesBefore: released.before, devicesAfter: released.after)
    }

    /// The room has members or holds: it is occupied (subscribed, not vacated).
    public func isOccupied(room: String) -> Bool { rooms[room] != nil }

    /// Holds in the room (all users).
    public func holdCount(room: String) -> Int { rooms[room]?.held.values.reduce(0) { $0 + $1.count } ?? 0 }

    public func isMember(room: String, connection: ConnectionID) -> Bool {
        rooms[room]?.members[connection] != nil
    }

    /// Users online in the room with their device counts (held ones included), sorted by user
    /// id.
    public func presence(room: String) -> [PresenceEntry] {
        guard let r = rooms[room] else { return [] }
        return r.presentByUser.map { PresenceEntry(user: $0.key, devices: $0.value) }.sorted { $0.user < $1.user }
    }

    public func memberCount(room: String) -> Int { rooms[room]?.members.count ?? 0 }

    public func isUserPresent(room: String, user: String) -> Bool { (rooms[room]?.presentDevices(user) ?? 0) > 0 }

    /// How many of the user's devices presence counts in the room: connected and held.
    public func devices(room: String, user: String) -> Int { rooms[room]?.presentDevices(user) ?? 0 }

    /// Every (room, user, devices) entry (held devices included), for restating presence
    /// elsewhere.
    public func allPresence() -> [(room: String, user: String, devices: Int)] {
        rooms.flatMap { room, r in r.presentByUser.map { (room: room, user: $0.key, devices: $0.value) } }
    }

    /// The partitions that hold at least one member of the room, ascending.
    public func partitions(room: String) -> [Int] {
        rooms[room]?.partitions ?? []
    }

    /// Every room with its member count and user count, unsorted (cheap to copy out of a lock).
    public func memberCounts() -> [(room: String, members: Int, users: Int)] {
        rooms.map { (room: $0.key, members: $0.value.members.count, users: $0.value.devicesByUser.count) }
    }

    /// Rooms with their member counts, busiest first. Ties are by name when at most 256 rooms
    /// share a size, else in no particular order: the cost is bounded by `limit` and the
    /// number of distinct sizes, never by the number of rooms.
    public func busiestRooms(limit: Int) -> [(room: String, members: Int, users: Int)] {
        var out: [(room: String, members: Int, users: Int)] = []
        for size in distinctSizes where out.count < limit {
            guard size < roomsBySize.count else { continue }
            let names = roomsBySize[size]
            let tied = names.count <= 256 ? names.sorted() : Array(names.prefix(limit - out.count))
            for name in tied.prefix(limit - out.count) {
                out.append((room: name, members: size, users: rooms[name]?.devicesByUser.count ?? 0))
            }
        }
        return out
    }

    /// Moves `room` (at `slot` among the rooms of size `old`) to the rooms of size `new`:
    /// returns its slot there, and the room moved into its old slot (which the caller tells
    /// its new slot), if one was. A swap with the last, so no name is hashed here.
    private mutating func resized(_ room: String, slot: Int, from old: Int, to new: Int) -> (slot: Int, moved: (room: String, slot: Int)?) {
        sizes.resize(from: old, to: new)
        var moved: (room: String, slot: Int)? = nil
        if old > 0, old < roomsBySize.count, slot < roomsBySize[old].count {
            let last = roomsBySize[old].removeLast()
            if slot < roomsBySize[old].count {
                roomsBySize[old][slot] = last
                moved = (last, slot)
            }
            if roomsBySize[old].isEmpty {
                let i = Self.position(of: old, in: distinctSizes)
                if i < distinctSizes.count, distinctSizes[i] == old { distinctSizes.remove(at: i) }
            }
        }
        guard new > 0 else { return (0, moved) }
        if new >= roomsBySize.count { roomsBySize.append(contentsOf: repeatElement([], count: new + 1 - roomsBySize.count)) }
        if roomsBySize[new].isEmpty {
            distinctSizes.insert(new, at: Self.position(of: new, in: distinctSizes))
        }
        roomsBySize[new].append(room)
        return (roomsBySize[new].count - 1, moved)
    }

    /// Where `size` is or would go in the descending `sizes` (binary search).
    private static func position(of size: Int, in sizes: [Int]) -> Int {
        var low = 0, high = sizes.count
        while low < high {
            let mid = (low + high) / 2
            if sizes[mid] > size { low = mid + 1 } else { high = mid }
        }
        return low
    }
}
