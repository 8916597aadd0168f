import XCTest
@testable import RelayCore

final class RoomSizeHistogramTests: XCTestCase {
    func testRegistryKeepsTheHistogramAndTheBusiestRoomsCurrent() throws {
        var reg = RoomRegistry()
        var next: UInt64 = 0
        func join(_ room: String, _ n: Int) throws {
            for _ in 0..<n {
                next += 1
                _ = try reg.join(room: room, connection: ConnectionID(next), user: "u\(next)", partition: 0)
            }
        }
        try join("a", 3)
        try join("b", 12)
        try join("c", 1)
        XCTAssertEqual(reg.sizes.rooms, 3)
        XCTAssertEqual(reg.sizes.sum, 16)
        // le=1: c; le=5: a, c; le=25: all three.
        let cumulative = reg.sizes.cumulative
        XCTAssertEqual(cumulative[0], 1)
        XCTAssertEqual(cumulative[2], 2)
        XCTAssertEqual(cumulative[4], 3)
        XCTAssertEqual(cumulative.last, 3)
        XCTAssertEqual(reg.busiestRooms(limit: 2).map(\.room), ["b", "a"])

        // Leaving moves rooms between buckets and out of the index.
        for id in 4...15 { _ = reg.leave(room: "b", connection: ConnectionID(UInt64(id))) }
        XCTAssertEqual(reg.sizes.rooms, 2)
        XCTAssertEqual(reg.sizes.sum, 4)
        XCTAssertEqual(reg.busiestRooms(limit: 5).map(\.room), ["a", "c"])
        _ = reg.leaveAll(connection: ConnectionID(16))
        XCTAssertEqual(reg.busiestRooms(limit: 5).map(\.room), ["a"])
        XCTAssertEqual(reg.sizes, {
            var h = RoomSizeHistogram()
            h.resize(from: 0, to: 3)
            return h
        }())
    }

    func testBusiestRoomsWithManyTiesIsBounded() throws {
        var reg = RoomRegistry(maxRoomsPerConnection: 100_000)
        for i in 0..<30_000 { _ = try reg.join(room: "r\(i)", connection: ConnectionID(1), user: "u", partition: 0) }
        _ = try reg.join(room: "r7", connection: ConnectionID(2), user: "v", partition: 0)
        let top = reg.busiestRooms(limit: 10)
        XCTAssertEqual(top.count, 10)
        XCTAssertEqual(top.first?.room, "r7")
        XCTAssertEqual(top.first?.members, 2)
        XCTAssertTrue(top.dropFirst().allSatisfy { $0.members == 1 })
        XCTAssertEqual(reg.sizes.rooms, 30_000)
    }
}
