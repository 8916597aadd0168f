import RelayTestSupport
import XCTest
@testable import RelayCore

final class ConnectionDirectoryTests: XCTestCase {
    private func c(_ n: UInt64) -> ConnectionID { ConnectionID(n) }

    private func register(_ dir: inout ConnectionDirectory, _ n: UInt64, _ user: String, _ partition: Int = 0,
                          file: StaticString = #filePath, line: UInt = #line) {
        do { try dir.register(c(n), user: user, partition: partition) } catch {
            XCTFail("unexpected \(error)", file: file, line: line)
        }
    }

    private func assertRegisterError(_ dir: inout ConnectionDirectory, _ n: UInt64, _ user: String,
                                     _ expected: ConnectionDirectory.RegisterError,
                                     file: StaticString = #filePath, line: UInt = #line) {
        do {
            try dir.register(c(n), user: user, partition: 0)
            XCTFail("expected \(expected)", file: file, line: line)
        } catch {
            XCTAssertEqual(error, expected, file: file, line: line)
        }
    }

    func testDefaults() {
        let dir = ConnectionDirectory(maxConnectionsPerUser: 20)
        XCTAssertEqual(dir.maxConnectionsPerUser, 20)
        XCTAssertEqual(dir.count, 0)
        XCTAssertEqual(dir.userCount, 0)
        XCTAssertFalse(dir.contains(c(1), user: "alice"))
        XCTAssertEqual(dir.connections(of: "alice"), [])
        XCTAssertEqual(dir.partitions(of: "alice"), [])
    }

    func testRegisterAndLookup() {
        var dir = ConnectionDirectory(maxConnectionsPerUser: 20)
        register(&dir, 3, "alice", 1)
        register(&dir, 1, "alice", 0)
        register(&dir, 2, "bob", 1)
        XCTAssertEqual(dir.count, 3)
        XCTAssertEqual(dir.userCount, 2)
        XCTAssertTrue(dir.contains(c(1), user: "alice"))
        XCTAssertTrue(dir.contains(c(2), user: "bob"))
        XCTAssertFalse(dir.contains(c(2), user: "alice"))
        XCTAssertEqual(dir.connections(of: "alice"), [c(1), c(3)], "sorted")
        XCTAssertEqual(dir.connections(of: "bob"), [c(2)])
    }

    func testPartitionsAreUniqueAndAscending() {
        var dir = ConnectionDirectory(maxConnectionsPerUser: 20)
        register(&dir, 1, "alice", 3)
        register(&dir, 2, "alice", 1)
        register(&dir, 3, "alice", 3)
        register(&dir, 4, "bob", 0)
        XCTAssertEqual(dir.partitions(of: "alice"), [1, 3])
        dir.unregister(c(2), user: "alice")
        XCTAssertEqual(dir.partitions(of: "alice"), [3])
        dir.unregister(c(1), user: "alice")
        XCTAssertEqual(dir.partitions(of: "alice"), [3])
        dir.unregister(c(3), user: "alice")
        XCTAssertEqual(dir.partitions(of: "alice"), [])
    }

    func testUnregister() {
        var dir = ConnectionDirectory(maxConnectionsPerUser: 20)
        register(&dir, 1, "alice")
        register(&dir, 2, "alice")
        XCTAssertFalse(dir.unregister(c(1), user: "bob"), "not bob's")
        XCTAssertEqual(dir.count, 2)
        XCTAssertTrue(dir.unregister(c(1), user: "alice"))
        XCTAssertFalse(dir.contains(c(1), user: "alice"))
        XCTAssertEqual(dir.connections(of: "alice"), [c(2)])
        XCTAssertEqual(dir.userCount, 1)
        dir.unregister(c(2), user: "alice")
        XCTAssertEqual(dir.count, 0)
        XCTAssertEqual(dir.userCount, 0, "a user with no connections is forgotten")
        XCTAssertFalse(dir.unregister(c(2), user: "alice"), "unknown: no-op")
        XCTAssertFalse(dir.unregister(c(99), user: "carol"))
        XCTAssertEqual(dir.count, 0)
    }

    func testPerUserLimit() {
        var dir = ConnectionDirectory(maxConnectionsPerUser: 2)
        register(&dir, 1, "alice")
        register(&dir, 2, "alice")
        assertRegisterError(&dir, 3, "alice", .tooManyForUser(limit: 2))
        XCTAssertFalse(dir.contains(c(3), user: "alice"))
        XCTAssertEqual(dir.count, 2)
        // Other users are unaffected.
        register(&dir, 3, "bob")
        // A slot frees when a connection goes.
        dir.unregister(c(1), user: "alice")
        register(&dir, 4, "alice")
        XCTAssertEqual(dir.connections(of: "alice"), [c(2), c(4)])
    }

    func testConnectionIDOrderingAndDescription() {
        XCTAssertLessThan(ConnectionID(1), ConnectionID(2))
        XCTAssertEqual(ConnectionID(42).description, "42")
        XCTAssertEqual(ConnectionID(7).raw, 7)
        XCTAssertEqual(Set([ConnectionID(1), ConnectionID(1), ConnectionID(2)]).count, 2)
    }
}
