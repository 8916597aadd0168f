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
        _ = reg.leave(room: "c", connection: ConnectionID(16))
        XCTAssertEqual(reg.busiestRooms(limit: 5).map(\.room), ["a"])
        XCTAssertEqual(reg.sizes, {
            var h = RoomSizeHistogram()
            h.resize(from: 0, to: 3)
            return h
        }())
    }

    func testHistogramsOfShardsAddUp() {
        var a = RoomSizeHistogram(), b = RoomSizeHistogram(), whole = RoomSizeHistogram()
        for (size, into) in [(1, 0), (7, 1), (300, 0), (20_000, 1)] {
            if into == 0 { a.resize(from: 0, to: size) } else { b.resize(from: 0, to: size) }
            whole.resize(from: 0, to: size)
        }
        a.add(b)
        XCTAssertEqual(a, whole)
        XCTAssertEqual(a.rooms, 4)
        XCTAssertEqual(a.sum, 20_308)
    }

    func testBusiestRoomsWithManyTiesIsBounded() throws {
        var reg = RoomRegistry()
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
