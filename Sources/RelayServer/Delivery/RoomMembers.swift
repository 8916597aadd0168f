import RelayCore

/// One room's members on one loop, kept dense so that a fan-out walks an array.
///
/// Each entry carries the sink's raw address too, for prefetching a few members ahead
/// without touching the sink. Removal swaps the last member into the hole (order is not kept).
struct RoomMembers {
    struct Member {
        let id: ConnectionID
        let sink: any ConnectionSink
        /// The sink's address (`Prefetch`); valid while the member is in the list.
        let address: UnsafeRawPointer

        init(_ sink: any ConnectionSink) {
            self.id = sink.connectionID
            self.sink = sink
            self.address = Prefetch.address(of: sink)
        }
    }

    private(set) var members: ContiguousArray<Member> = []
    private var slots: [ConnectionID: Int] = [:]

    var count: Int { members.count }
    var isEmpty: Bool { members.isEmpty }

    func contains(_ id: ConnectionID) -> Bool { slots[id] != nil }

    /// Adds or replaces the sink of `sink.connectionID`.
    mutating func insert(_ sink: any ConnectionSink) {
        let member = Member(sink)
        if let slot = slots[member.id] {
            members[slot] = member
        } else {
            slots[member.id] = members.count
            members.append(member)
        }
    }

    mutating func remove(_ id: ConnectionID) {
        guard let slot = slots.removeValue(forKey: id) else { return }
        let last = members.count - 1
        if slot != last {
            members[slot] = members[last]
            slots[members[slot].id] = slot
        }
        members.removeLast()
    }
}
