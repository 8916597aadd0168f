import XCTest
@testable import RelayCore

final class RoomAuthorizationTests: XCTestCase {
    func testExactMatches() {
        let auth = RoomAuthorization(patterns: ["conversation:1", "lobby"])
        XCTAssertTrue(auth.allows("conversation:1"))
        XCTAssertTrue(auth.allows("lobby"))
        XCTAssertFalse(auth.allows("conversation:2"))
        XCTAssertFalse(auth.allows("conversation:10"), "an exact pattern is not a prefix")
        XCTAssertFalse(auth.allows("Lobby"), "case-sensitive")
        XCTAssertFalse(auth.allows("lobby "))
        XCTAssertFalse(auth.allows(""))
        XCTAssertEqual(auth.exact, ["conversation:1", "lobby"])
        XCTAssertEqual(auth.prefixes, [])
    }

    func testPrefixMatches() {
        let auth = RoomAuthorization(patterns: ["conversation:*", "team:42:*"])
        XCTAssertEqual(auth.prefixes, ["conversation:", "team:42:"])
        XCTAssertTrue(auth.allows("conversation:1"))
        XCTAssertTrue(auth.allows("conversation:abc:def"))
        XCTAssertTrue(auth.allows("team:42:general"))
        XCTAssertFalse(auth.allows("team:43:general"))
        XCTAssertFalse(auth.allows("conversation"), "the prefix includes the colon")
        XCTAssertFalse(auth.allows("xconversation:1"))
    }

    func testMixed() {
        let auth = RoomAuthorization(patterns: ["a", "b:*"])
        XCTAssertTrue(auth.allows("a"))
        XCTAssertTrue(auth.allows("b:1"))
        XCTAssertFalse(auth.allows("a:1"))
    }

    func testStarAloneAllowsEveryRoom() {
        let auth = RoomAuthorization(patterns: ["*"])
        XCTAssertTrue(auth.allows("anything"))
        XCTAssertTrue(auth.allows("conversation:1"))
    }

    func testStarOnlyCountsAtTheEnd() {
        let auth = RoomAuthorization(patterns: ["a*b"])
        XCTAssertTrue(auth.allows("a*b"))
        XCTAssertFalse(auth.allows("axb"))
    }

    func testEmptyPatternsAreIgnored() {
        let auth = RoomAuthorization(patterns: ["", ""])
        XCTAssertTrue(auth.exact.isEmpty)
        XCTAssertTrue(auth.prefixes.isEmpty)
        XCTAssertFalse(auth.allows(""))
        XCTAssertFalse(auth.allows("x"))
        XCTAssertFalse(RoomAuthorization(patterns: []).allows("x"))
    }

    func testEquatable() {
        XCTAssertEqual(RoomAuthorization(patterns: ["a", "b"]), RoomAuthorization(patterns: ["b", "a", ""]))
        XCTAssertNotEqual(RoomAuthorization(patterns: ["a"]), RoomAuthorization(patterns: ["a*"]))
    }
}
