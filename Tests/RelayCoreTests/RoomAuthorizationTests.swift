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

    func testLookAlikeRoomsAreDistinctByBytes() {
        let auth = RoomAuthorization(patterns: ["conversation:caf\u{E9}", "user:jos\u{E9}"])
        XCTAssertTrue(auth.allows("conversation:caf\u{E9}"))
        XCTAssertFalse(auth.allows("conversation:cafe\u{301}"), "canonically equal, different bytes")
        XCTAssertTrue(auth.allows("user:jos\u{E9}"))
        XCTAssertFalse(auth.allows("user:jose\u{301}"))
    }

    func testNonNFCPatternsNeverMatch() {
        let auth = RoomAuthorization(patterns: ["conversation:cafe\u{301}", "user:jose\u{301}*", "lobby"])
        XCTAssertEqual(auth.exact, ["lobby"])
        XCTAssertEqual(auth.prefixes, [])
        XCTAssertFalse(auth.allows("conversation:cafe\u{301}"))
        XCTAssertFalse(auth.allows("conversation:caf\u{E9}"))
        XCTAssertFalse(auth.allows("user:jose\u{301}1"))
        XCTAssertFalse(auth.allows("user:jos\u{E9}1"))
    }

    func testPrefixesMatchBytes() {
        let auth = RoomAuthorization(patterns: ["team:caf\u{E9}*", "conversation:*", "x:e*"])
        XCTAssertTrue(auth.allows("team:caf\u{E9}:1"))
        XCTAssertFalse(auth.allows("team:cafe\u{301}:1"), "not NFC")
        XCTAssertTrue(auth.allows("x:ex"))
        XCTAssertFalse(auth.allows("x:\u{E9}"), "é is one scalar whose bytes do not start with e")
        XCTAssertFalse(auth.allows("x:e\u{301}"), "the decomposed spelling is not NFC")
    }

    func testCombiningMarkRightAfterThePrefix() {
        let auth = RoomAuthorization(patterns: ["conversation:*"])
        // `:` does not compose with U+0301, so this room is NFC; byte-wise it starts with the prefix,
        // although as Characters its `:\u{301}` is one grapheme and `hasPrefix` would say no.
        let room = "conversation:\u{301}x"
        XCTAssertTrue(Identifier.isNormalized(room))
        XCTAssertFalse(room.hasPrefix("conversation:"))
        XCTAssertTrue(auth.allows(room))
        XCTAssertFalse(RoomAuthorization(patterns: ["conversation:\u{301}*"]).allows("conversation:x"))
    }
}
