import XCTest

@testable import RelayCore

final class ConnectionMapTests: XCTestCase {
    func testOneEntryInlineThenManyThenBackToOne() {
        var map = ConnectionMap<String>()
        XCTAssertTrue(map.isEmpty)
        map.set(ConnectionID(1), "a")
        guard case .one = map else { return XCTFail("one entry is kept inline") }
        map.set(ConnectionID(1), "a2")
        XCTAssertEqual(map.count, 1)
        XCTAssertEqual(map[ConnectionID(1)], "a2")
        map.set(ConnectionID(2), "b")
        map.set(ConnectionID(3), "c")
        XCTAssertEqual(map.count, 3)
        XCTAssertEqual(map.keys.sorted(), [ConnectionID(1), ConnectionID(2), ConnectionID(3)])
        XCTAssertEqual(map[ConnectionID(2)], "b")
        XCTAssertNil(map[ConnectionID(4)])
        map.remove(ConnectionID(2))
        map.remove(ConnectionID(4))
        XCTAssertEqual(map.count, 2)
        map.remove(ConnectionID(1))
        guard case .one(let id, let value) = map else { return XCTFail("back to inline") }
        XCTAssertEqual(id, ConnectionID(3))
        XCTAssertEqual(value, "c")
        map.remove(ConnectionID(3))
        XCTAssertTrue(map.isEmpty)
        var seen = 0
        map.forEach { _, _ in seen += 1 }
        XCTAssertEqual(seen, 0)
    }

    func testDirectoryCountsAndPartitionsPerUser() throws {
        var d = ConnectionDirectory(maxConnectionsPerUser: 2)
        try d.register(ConnectionID(1), user: "u", partition: 1)
        try d.register(ConnectionID(2), user: "u", partition: 0)
        XCTAssertThrowsError(try d.register(ConnectionID(3), user: "u", partition: 0))
        XCTAssertEqual(d.connections(of: "u"), [ConnectionID(1), ConnectionID(2)])
        XCTAssertEqual(d.partitions(of: "u"), [0, 1])
        d.unregister(ConnectionID(1), user: "u")
        XCTAssertEqual(d.connections(of: "u"), [ConnectionID(2)])
        d.unregister(ConnectionID(2), user: "u")
        XCTAssertEqual(d.userCount, 0)
    }
}
