import XCTest
@testable import RelayCore

final class ConnectionRoomsTests: XCTestCase {
    private func c(_ n: UInt64) -> ConnectionID { ConnectionID(n) }

    func testDefaults() {
        let rooms = ConnectionRooms()
        XCTAssertEqual(rooms.maxRoomsPerConnection, 100)
        XCTAssertEqual(rooms.rooms(of: c(1)), [])
        XCTAssertFalse(rooms.contains("r", for: c(1)))
        XCTAssertEqual(rooms.connectionCount, 0)
    }

    func testLimitPerConnection() throws {
        var rooms = ConnectionRooms(maxRoomsPerConnection: 3)
        for room in ["a", "b", "c"] { XCTAssertTrue(try rooms.reserve(room, for: c(1))) }
        XCTAssertThrowsError(try rooms.reserve("d", for: c(1))) { error in
            XCTAssertEqual(error as? ConnectionRooms.TooManyRooms, ConnectionRooms.TooManyRooms(limit: 3))
        }
        XCTAssertFalse(rooms.contains("d", for: c(1)))
        // A room it is already in is not a new room, even at the limit.
        XCTAssertFalse(try rooms.reserve("a", for: c(1)))
        // Other connections have their own budget.
        XCTAssertTrue(try rooms.reserve("d", for: c(2)))
        // Leaving (or a failed join given back) frees a slot.
        rooms.release("a", for: c(1))
        XCTAssertTrue(try rooms.reserve("d", for: c(1)))
        XCTAssertEqual(rooms.rooms(of: c(1)), ["b", "c", "d"])
    }

    func testReleaseOfWhatIsNotThereChangesNothing() throws {
        var rooms = ConnectionRooms()
        rooms.release("r", for: c(1))
        XCTAssertTrue(try rooms.reserve("r", for: c(1)))
        rooms.release("other", for: c(1))
        XCTAssertEqual(rooms.rooms(of: c(1)), ["r"])
        rooms.release("r", for: c(1))
        XCTAssertEqual(rooms.connectionCount, 0, "a connection in no room is forgotten")
    }

    func testRemoveAllGivesTheRoomsInNameOrder() throws {
        var rooms = ConnectionRooms()
        for room in ["zeta", "alpha", "mid"] { _ = try rooms.reserve(room, for: c(1)) }
        _ = try rooms.reserve("mid", for: c(2))
        XCTAssertEqual(rooms.removeAll(for: c(1)), ["alpha", "mid", "zeta"])
        XCTAssertEqual(rooms.rooms(of: c(1)), [])
        XCTAssertEqual(rooms.rooms(of: c(2)), ["mid"])
        XCTAssertEqual(rooms.removeAll(for: c(1)), [])
        XCTAssertEqual(rooms.removeAll(for: c(99)), [])
    }
}
