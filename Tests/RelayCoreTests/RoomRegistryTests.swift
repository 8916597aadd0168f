import RelayTestSupport
import XCTest
@testable import RelayCore

final class RoomRegistryTests: XCTestCase {
    private func c(_ n: UInt64) -> ConnectionID { ConnectionID(n) }

    @discardableResult
    private func join(
        _ reg: inout RoomRegistry, _ room: String, _ conn: UInt64, _ user: String, partition: Int = 0,
        file: StaticString = #filePath, line: UInt = #line
    ) -> RoomRegistry.JoinResult? {
        do { return try reg.join(room: room, connection: c(conn), user: user, partition: partition) } catch {
            XCTFail("unexpected \(error)", file: file, line: line)
            return nil
        }
    }

    private func assertJoinError(
        _ reg: inout RoomRegistry, _ room: String, _ conn: UInt64, _ user: String, _ expected: RoomRegistry.JoinError,
        file: StaticString = #filePath, line: UInt = #line
    ) {
        do {
            let r = try reg.join(room: room, connection: c(conn), user: user, partition: 0)
            XCTFail("expected \(expected), got \(r)", file: file, line: line)
        } catch {
            XCTAssertEqual(error, expected, file: file, line: line)
        }
    }

    func testDefaults() {
        let reg = RoomRegistry()
        XCTAssertEqual(reg.maxMembersPerRoom, 10_000)
        XCTAssertEqual(reg.roomCount, 0)
        XCTAssertEqual(reg.presence(room: "r"), [])
        XCTAssertEqual(reg.memberCount(room: "r"), 0)
        XCTAssertEqual(reg.partitions(room: "r"), [])
    }

    func testJoinAndLeave() {
        var reg = RoomRegistry()
        let result = join(&reg, "r", 1, "alice")
        XCTAssertEqual(result, RoomRegistry.JoinResult(alreadyMember: false, userBecamePresent: true, devicesBefore: 0, devicesAfter: 1))
        XCTAssertTrue(reg.isMember(room: "r", connection: c(1)))
        XCTAssertFalse(reg.isMember(room: "r", connection: c(2)))
        XCTAssertFalse(reg.isMember(room: "other", connection: c(1)))
        XCTAssertTrue(reg.isUserPresent(room: "r", user: "alice"))
        XCTAssertEqual(reg.memberCount(room: "r"), 1)
        XCTAssertEqual(reg.roomCount, 1)

        XCTAssertEqual(reg.leave(room: "r", connection: c(1)), RoomRegistry.LeaveResult(room: "r", user: "alice", userLeftPresence: true))
        XCTAssertFalse(reg.isMember(room: "r", connection: c(1)))
        XCTAssertFalse(reg.isUserPresent(room: "r", user: "alice"))
        XCTAssertEqual(reg.roomCount, 0, "an empty room is removed")
    }

    func testJoinTwiceIsIdempotent() {
        var reg = RoomRegistry()
        join(&reg, "r", 1, "alice")
        XCTAssertEqual(join(&reg, "r", 1, "alice"), RoomRegistry.JoinResult(alreadyMember: true, userBecamePresent: false, devicesBefore: 1, devicesAfter: 1))
        XCTAssertEqual(reg.memberCount(room: "r"), 1)
        XCTAssertEqual(reg.presence(room: "r"), [PresenceEntry(user: "alice", devices: 1)])
        // One leave is enough.
        XCTAssertNotNil(reg.leave(room: "r", connection: c(1)))
        XCTAssertEqual(reg.roomCount, 0)
    }

    func testLeaveWhenNotAMember() {
        var reg = RoomRegistry()
        XCTAssertNil(reg.leave(room: "r", connection: c(1)))
        join(&reg, "r", 1, "alice")
        XCTAssertNil(reg.leave(room: "r", connection: c(2)))
        XCTAssertNil(reg.leave(room: "other", connection: c(1)))
        XCTAssertEqual(reg.memberCount(room: "r"), 1)
        XCTAssertNotNil(reg.leave(room: "r", connection: c(1)))
        XCTAssertNil(reg.leave(room: "r", connection: c(1)), "second leave")
    }

    // MARK: - Multi-device presence

    func testUserLeavesPresenceOnlyWhenTheLastDeviceLeaves() {
        var reg = RoomRegistry()
        XCTAssertEqual(join(&reg, "r", 1, "alice")?.userBecamePresent, true)
        XCTAssertEqual(join(&reg, "r", 2, "alice")?.userBecamePresent, false)
        XCTAssertEqual(join(&reg, "r", 3, "alice")?.userBecamePresent, false)
        XCTAssertEqual(join(&reg, "r", 4, "bob")?.userBecamePresent, true)
        XCTAssertEqual(reg.presence(room: "r"), [PresenceEntry(user: "alice", devices: 3), PresenceEntry(user: "bob", devices: 1)])
        XCTAssertEqual(reg.memberCount(room: "r"), 4)

        XCTAssertEqual(reg.leave(room: "r", connection: c(2))?.userLeftPresence, false)
        XCTAssertTrue(reg.isUserPresent(room: "r", user: "alice"))
        XCTAssertEqual(reg.presence(room: "r").first, PresenceEntry(user: "alice", devices: 2))
        XCTAssertEqual(reg.leave(room: "r", connection: c(1))?.userLeftPresence, false)
        XCTAssertEqual(reg.leave(room: "r", connection: c(3)), RoomRegistry.LeaveResult(room: "r", user: "alice", userLeftPresence: true))
        XCTAssertFalse(reg.isUserPresent(room: "r", user: "alice"))
        XCTAssertEqual(reg.presence(room: "r"), [PresenceEntry(user: "bob", devices: 1)])

        // Rejoining makes alice present again.
        XCTAssertEqual(join(&reg, "r", 2, "alice")?.userBecamePresent, true)
    }

    func testPresenceIsSortedByUser() {
        var reg = RoomRegistry()
        for (i, u) in ["zoe", "adam", "mia", "bob"].enumerated() { join(&reg, "r", UInt64(i), u) }
        XCTAssertEqual(reg.presence(room: "r").map(\.user), ["adam", "bob", "mia", "zoe"])
    }

    func testPresenceIsPerRoom() {
        var reg = RoomRegistry()
        join(&reg, "r1", 1, "alice")
        join(&reg, "r2", 2, "alice")
        XCTAssertEqual(reg.leave(room: "r1", connection: c(1))?.userLeftPresence, true, "alice's device in r2 does not count for r1")
        XCTAssertTrue(reg.isUserPresent(room: "r2", user: "alice"))
    }

    func testPresenceEntryJSON() {
        XCTAssertEqual(JSONWriter.string(PresenceEntry(user: "alice", devices: 2).json), #"{"user":"alice","devices":2}"#)
    }

    // MARK: - Limits

    func testRoomFull() {
        var reg = RoomRegistry(maxMembersPerRoom: 2)
        join(&reg, "r", 1, "alice")
        join(&reg, "r", 2, "alice")
        assertJoinError(&reg, "r", 3, "bob", .roomFull(limit: 2))
        XCTAssertFalse(reg.isUserPresent(room: "r", user: "bob"))
        XCTAssertFalse(reg.isMember(room: "r", connection: c(3)))
        XCTAssertEqual(reg.memberCount(room: "r"), 2)
        // A member rejoining is not refused.
        XCTAssertEqual(join(&reg, "r", 1, "alice")?.alreadyMember, true)
        _ = reg.leave(room: "r", connection: c(2))
        XCTAssertEqual(join(&reg, "r", 3, "bob")?.userBecamePresent, true)
    }

    // MARK: - Partitions

    func testPartitionsTrackMembers() {
        var reg = RoomRegistry()
        join(&reg, "r", 1, "alice", partition: 2)
        join(&reg, "r", 2, "bob", partition: 0)
        join(&reg, "r", 3, "carol", partition: 2)
        join(&reg, "other", 4, "dave", partition: 1)
        XCTAssertEqual(reg.partitions(room: "r"), [0, 2])
        XCTAssertEqual(reg.partitions(room: "other"), [1])
        _ = reg.leave(room: "r", connection: c(1))
        XCTAssertEqual(reg.partitions(room: "r"), [0, 2], "carol still lives on partition 2")
        _ = reg.leave(room: "r", connection: c(3))
        XCTAssertEqual(reg.partitions(room: "r"), [0])
        _ = reg.leave(room: "r", connection: c(2))
        XCTAssertEqual(reg.partitions(room: "r"), [])
    }

    func testRejoinDoesNotDoubleCountPartition() {
        var reg = RoomRegistry()
        join(&reg, "r", 1, "alice", partition: 3)
        join(&reg, "r", 1, "alice", partition: 3)
        _ = reg.leave(room: "r", connection: c(1))
        XCTAssertEqual(reg.partitions(room: "r"), [])
        join(&reg, "r", 2, "bob", partition: 1)
        XCTAssertEqual(reg.partitions(room: "r"), [1])
    }

    // MARK: - Busiest rooms

    func testBusiestRoomsOrdering() {
        var reg = RoomRegistry()
        var next: UInt64 = 0
        for (room, members) in [("small", 1), ("big", 5), ("b-tie", 3), ("a-tie", 3), ("mid", 2)] {
            for _ in 0..<members {
                next += 1
                join(&reg, room, next, "u\(next)")
            }
        }
        let all = reg.busiestRooms(limit: 10)
        XCTAssertEqual(all.map(\.room), ["big", "a-tie", "b-tie", "mid", "small"])
        XCTAssertEqual(all.map(\.members), [5, 3, 3, 2, 1])
        let top2 = reg.busiestRooms(limit: 2)
        XCTAssertEqual(top2.map(\.room), ["big", "a-tie"])
        XCTAssertEqual(reg.busiestRooms(limit: 0).count, 0)
        XCTAssertEqual(RoomRegistry().busiestRooms(limit: 5).count, 0)
    }

    func testBusiestRoomsCountsConnectionsNotUsers() {
        var reg = RoomRegistry()
        join(&reg, "multi", 1, "alice")
        join(&reg, "multi", 2, "alice")
        join(&reg, "single", 3, "bob")
        let top = reg.busiestRooms(limit: 1)
        XCTAssertEqual(top.first?.room, "multi")
        XCTAssertEqual(top.first?.members, 2)
    }

    func testRandomisedInvariants() {
        var rng = SplitMix64(seed: 7)
        // Composed as the hub composes them: the connection's rooms first (the limit), then the
        // room (full or not), the reservation given back when the room refuses.
        var reg = RoomRegistry(maxMembersPerRoom: 6)
        var byConnection = ConnectionRooms(maxRoomsPerConnection: 4)
        // Model: connection -> (user, partition, rooms)
        var owner: [UInt64: (user: String, partition: Int)] = [:]
        var membership: [String: Set<UInt64>] = [:]
        for _ in 0..<5_000 {
            let conn = UInt64.random(in: 1...12, using: &rng)
            let info = owner[conn] ?? (user: "u\(conn % 5)", partition: Int(conn % 3))
            owner[conn] = info
            let room = "r\(Int.random(in: 0..<6, using: &rng))"
            switch Int.random(in: 0..<10, using: &rng) {
            case 0..<6:
                let inRoom = membership[room]?.contains(conn) ?? false
                let roomsOfConn = membership.filter { $0.value.contains(conn) }.count
                let reserved: Bool
                do { reserved = try byConnection.reserve(room, for: c(conn)) } catch {
                    XCTAssertFalse(inRoom)
                    XCTAssertEqual(roomsOfConn, 4)
                    XCTAssertEqual(error.limit, 4)
                    break
                }
                XCTAssertEqual(reserved, !inRoom)
                do {
                    let r = try reg.join(room: room, connection: c(conn), user: info.user, partition: info.partition)
                    XCTAssertEqual(r.alreadyMember, inRoom)
                    if !inRoom {
                        let otherDevices = (membership[room] ?? []).contains { owner[$0]!.user == info.user }
                        XCTAssertEqual(r.userBecamePresent, !otherDevices)
                        membership[room, default: []].insert(conn)
                    }
                } catch {
                    XCTAssertFalse(inRoom)
                    XCTAssertEqual(error, .roomFull(limit: 6))
                    XCTAssertEqual(membership[room]?.count, 6)
                    byConnection.release(room, for: c(conn))
                }
            case 6..<9:
                let result = reg.leave(room: room, connection: c(conn))
                if result != nil { byConnection.release(room, for: c(conn)) }
                if membership[room]?.remove(conn) != nil {
                    let devices = (membership[room] ?? []).filter { owner[$0]!.user == info.user }.count
                    XCTAssertEqual(
                        result, RoomRegistry.LeaveResult(room: room, user: info.user, userLeftPresence: devices == 0, devicesBefore: devices + 1, devicesAfter: devices))
                } else {
                    XCTAssertNil(result)
                }
            default:
                let results = byConnection.removeAll(for: c(conn)).compactMap { reg.leave(room: $0, connection: c(conn)) }
                let rooms = membership.filter { $0.value.contains(conn) }.map(\.key).sorted()
                XCTAssertEqual(results.map(\.room), rooms)
                for r in rooms { membership[r]!.remove(conn) }
            }
            membership = membership.filter { !$0.value.isEmpty }
            // Invariants against the model.
            XCTAssertEqual(reg.roomCount, membership.count)
            for (r, conns) in membership {
                XCTAssertEqual(reg.memberCount(room: r), conns.count)
                var devices: [String: Int] = [:]
                for m in conns { devices[owner[m]!.user, default: 0] += 1 }
                XCTAssertEqual(reg.presence(room: r), devices.map { PresenceEntry(user: $0.key, devices: $0.value) }.sorted { $0.user < $1.user })
                XCTAssertEqual(reg.partitions(room: r), Set(conns.map { owner[$0]!.partition }).sorted())
            }
            XCTAssertEqual(byConnection.rooms(of: c(conn)), Set(membership.filter { $0.value.contains(conn) }.map(\.key)))
        }
    }

    /// Joins, leaves with and without holds, and hold releases against a model: the devices
    /// each result reports, presence with holds, occupancy, and the busiest rooms (whose
    /// size buckets grow and empty as rooms move between sizes).
    func testRandomisedInvariantsWithHolds() {
        var rng = SplitMix64(seed: 11)
        var reg = RoomRegistry(maxMembersPerRoom: 5)
        var members: [String: [UInt64: String]] = [:]  // room -> connection -> user
        var holds: [String: [String: [Int64]]] = [:]  // room -> user -> deadlines, ascending
        var now: Int64 = 0
        func present(_ room: String, _ user: String) -> Int {
            (members[room] ?? [:]).values.filter { $0 == user }.count + (holds[room]?[user]?.count ?? 0)
        }
        for _ in 0..<6_000 {
            now += Int64.random(in: 0...3, using: &rng)
            let conn = UInt64.random(in: 1...10, using: &rng)
            let user = "u\(conn % 4)"
            let room = "r\(Int.random(in: 0..<5, using: &rng))"
            switch Int.random(in: 0..<10, using: &rng) {
            case 0..<5:
                let before = present(room, user)
                let inRoom = members[room]?[conn] != nil
                do {
                    let r = try reg.join(room: room, connection: c(conn), user: user, partition: 0)
                    XCTAssertEqual(r.alreadyMember, inRoom)
                    XCTAssertEqual(r.devicesBefore, before)
                    if !inRoom {
                        members[room, default: [:]][conn] = user
                        if var h = holds[room]?[user], !h.isEmpty {
                            h.removeFirst()
                            holds[room]?[user] = h.isEmpty ? nil : h
                        }
                    }
                    XCTAssertEqual(r.devicesAfter, present(room, user))
                    XCTAssertEqual(r.userBecamePresent, !inRoom && before == 0)
                } catch {
                    XCTAssertFalse(inRoom)
                    XCTAssertEqual(members[room]?.count, 5)
                }
            case 5..<8:
                let hold: Int64? = Bool.random(using: &rng) ? now + Int64.random(in: 0...20, using: &rng) : nil
                let leaver = members[room]?[conn]
                let before = leaver.map { present(room, $0) } ?? 0
                let r = reg.leave(room: room, connection: c(conn), holdingUntil: hold)
                guard let leaver else {
                    XCTAssertNil(r)
                    break
                }
                members[room]?[conn] = nil
                if let hold {
                    var h = holds[room]?[leaver] ?? []
                    h.insert(hold, at: h.firstIndex { $0 > hold } ?? h.endIndex)
                    holds[room, default: [:]][leaver] = h
                }
                let after = present(room, leaver)
                XCTAssertEqual(r, RoomRegistry.LeaveResult(room: room, user: leaver, userLeftPresence: after == 0, devicesBefore: before, devicesAfter: after))
            default:
                let before = present(room, user)
                let due = holds[room]?[user]?.filter { $0 <= now }.count ?? 0
                let r = reg.releaseHolds(room: room, user: user, now: now)
                guard due > 0 else {
                    XCTAssertNil(r)
                    break
                }
                let kept = Array((holds[room]?[user] ?? []).dropFirst(due))
                holds[room]?[user] = kept.isEmpty ? nil : kept
                XCTAssertEqual(r, RoomRegistry.LeaveResult(room: room, user: user, userLeftPresence: before - due == 0, devicesBefore: before, devicesAfter: before - due))
            }
            members = members.filter { !$0.value.isEmpty }
            holds = holds.filter { !$0.value.isEmpty }
            let occupied = Set(members.keys).union(holds.keys)
            XCTAssertEqual(reg.roomCount, occupied.count)
            for room in occupied {
                XCTAssertTrue(reg.isOccupied(room: room))
                var devices: [String: Int] = [:]
                for u in (members[room] ?? [:]).values { devices[u, default: 0] += 1 }
                for (u, h) in holds[room] ?? [:] { devices[u, default: 0] += h.count }
                XCTAssertEqual(reg.presence(room: room), devices.map { PresenceEntry(user: $0.key, devices: $0.value) }.sorted { $0.user < $1.user })
            }
            let busiest = reg.busiestRooms(limit: 10)
            let expected = members.map { (room: $0.key, members: $0.value.count) }.sorted { ($0.members, $1.room) > ($1.members, $0.room) }
            XCTAssertEqual(busiest.map(\.room), expected.map(\.room))
            XCTAssertEqual(busiest.map(\.members), expected.map(\.members))
        }
    }
}
