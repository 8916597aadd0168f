import XCTest
@testable import RelayCore

final class EventValidatorTests: XCTestCase {
    // MARK: - room

    func testRoom() throws {
        XCTAssertEqual(try EventValidator.room(in: ["room": "conversation:42"]), "conversation:42")
        XCTAssertEqual(try EventValidator.room(in: ["room": "ünïcode-ok"]), "ünïcode-ok")
    }

    func testRoomRequired() {
        for payload: JSONValue in [.null, "room", [1], .object([]), ["room": nil], ["room": 5], ["room": ["a"]], ["Room": "r"]] {
            assertRelayError(.invalidPayload) { () throws(RelayError) in try EventValidator.room(in: payload) }
        }
    }

    func testRoomNameRules() {
        XCTAssertTrue(EventValidator.isValidRoomName("a"))
        XCTAssertTrue(EventValidator.isValidRoomName("conversation:1"))
        XCTAssertTrue(EventValidator.isValidRoomName("!#~"))
        XCTAssertTrue(EventValidator.isValidRoomName(String(repeating: "r", count: 128)))
        XCTAssertFalse(EventValidator.isValidRoomName(String(repeating: "r", count: 129)))
        // The limit is in bytes: 64 two-byte characters fit, 65 do not.
        XCTAssertTrue(EventValidator.isValidRoomName(String(repeating: "é", count: 64)))
        XCTAssertFalse(EventValidator.isValidRoomName(String(repeating: "é", count: 65)))
        XCTAssertFalse(EventValidator.isValidRoomName(""))
        XCTAssertFalse(EventValidator.isValidRoomName("has space"))
        XCTAssertFalse(EventValidator.isValidRoomName("tab\there"))
        XCTAssertFalse(EventValidator.isValidRoomName("nl\n"))
        XCTAssertFalse(EventValidator.isValidRoomName("nul\u{0}"))
        XCTAssertFalse(EventValidator.isValidRoomName("del\u{7F}"))
        XCTAssertFalse(EventValidator.isValidRoomName("c1\u{85}"), "C1 controls are refused")
        XCTAssertTrue(EventValidator.isValidRoomName("conversation:caf\u{E9}"))
        XCTAssertFalse(EventValidator.isValidRoomName("conversation:cafe\u{301}"), "not NFC")
    }

    func testNonNFCIdentifiersAreInvalidPayload() {
        assertRelayError(.invalidPayload) { () throws(RelayError) in try EventValidator.room(in: ["room": "conversation:cafe\u{301}"]) }
        assertRelayError(.invalidPayload) { () throws(RelayError) in try EventValidator.roomOnly(["room": "jose\u{301}"]) }
        assertRelayError(.invalidPayload) { () throws(RelayError) in
            try EventValidator.reaction(["room": "r", "messageId": "jose\u{301}", "emoji": "👍", "action": "add"])
        }
        assertRelayError(.invalidPayload) { () throws(RelayError) in
            try EventValidator.reaction(["room": "r", "messageId": "m\u{1}", "emoji": "👍", "action": "add"])
        }
        XCTAssertNoThrow(try EventValidator.reaction(["room": "caf\u{E9}", "messageId": "jos\u{E9}", "emoji": "👍", "action": "add"]))
        for payload: JSONValue in [
            ["room": "r", "messageId": "m\u{E9}", "authorId": "jose\u{301}"],
            ["room": "r", "messageId": "me\u{301}", "authorId": "a"],
            ["room": "cafe\u{301}", "messageId": "m", "authorId": "a"],
            ["room": "r", "messageId": "m", "authorId": "a\u{9F}"],
        ] {
            XCTAssertThrowsError(try NewReceipt(payload: payload, userID: "u", kind: .read, ts: 1), "\(payload)") { error in
                XCTAssertEqual((error as? RelayError)?.code, .invalidPayload)
            }
        }
        XCTAssertNoThrow(try NewReceipt(payload: ["room": "r", "messageId": "m\u{E9}", "authorId": "jos\u{E9}"], userID: "u", kind: .read, ts: 1))
        assertRelayError(.invalidPayload) { () throws(RelayError) in try EventValidator.room(in: ["room": ""]) }
        assertRelayError(.invalidPayload) { () throws(RelayError) in
            try EventValidator.room(in: ["room": .string(String(repeating: "r", count: 129))])
        }
    }

    // MARK: - reaction

    func testReaction() throws {
        let out = try EventValidator.reaction([
            "room": "r", "messageId": "m1", "emoji": "👍", "action": "add", "extra": "dropped", "from": "forged",
        ])
        XCTAssertEqual(
            JSONWriter.string(out), #"{"room":"r","messageId":"m1","emoji":"👍","action":"add"}"#)
        XCTAssertEqual(try EventValidator.reaction(["room": "r", "messageId": "m1", "emoji": "x", "action": "remove"])["action"], "remove")
    }

    func testReactionErrors() {
        let good: [(String, JSONValue)] = [("room", "r"), ("messageId", "m"), ("emoji", "👍"), ("action", "add")]
        func with(_ key: String, _ value: JSONValue?) -> JSONValue {
            var pairs = good.filter { $0.0 != key }
            if let value { pairs.append((key, value)) }
            return .object(pairs)
        }
        let bad: [JSONValue] = [
            with("room", nil), with("room", ""),
            with("messageId", nil), with("messageId", ""), with("messageId", 5),
            with("messageId", .string(String(repeating: "m", count: 129))),
            with("emoji", nil), with("emoji", ""), with("emoji", .string(String(repeating: "a", count: 9))),
            with("emoji", .string(String(repeating: "😀", count: 17))),  // 68 bytes
            with("action", nil), with("action", "toggle"), with("action", "ADD"), with("action", true),
        ]
        for payload in bad {
            assertRelayError(.invalidPayload) { () throws(RelayError) in try EventValidator.reaction(payload) }
        }
        // Boundaries that pass.
        XCTAssertNoThrow(try EventValidator.reaction(with("messageId", .string(String(repeating: "m", count: 128)))))
        XCTAssertNoThrow(try EventValidator.reaction(with("emoji", .string(String(repeating: "a", count: 8)))))
        // A family emoji is one character but many bytes.
        XCTAssertNoThrow(try EventValidator.reaction(with("emoji", "👨‍👩‍👧‍👦")))
        XCTAssertEqual(EventValidator.maxEmojiBytes, 64)
    }

    // MARK: - share-live

    func testShareLive() throws {
        let (out, duration) = try EventValidator.shareLive(["room": "r", "durationSec": 900, "junk": 1])
        XCTAssertEqual(duration, 900)
        XCTAssertEqual(JSONWriter.string(out), #"{"room":"r","durationSec":900}"#)
        // An integral double is accepted and forwarded as an integer.
        let (out2, d2) = try EventValidator.shareLive(["room": "r", "durationSec": 60.0])
        XCTAssertEqual(d2, 60)
        XCTAssertEqual(JSONWriter.string(out2), #"{"room":"r","durationSec":60}"#)
    }

    func testShareLiveBounds() throws {
        XCTAssertEqual(try EventValidator.shareLive(["room": "r", "durationSec": 1]).1, 1)
        XCTAssertEqual(try EventValidator.shareLive(["room": "r", "durationSec": 28_800]).1, 28_800)
        XCTAssertEqual(EventValidator.maxLiveShareSeconds, 8 * 3600)
        for d: JSONValue in [0, -1, 28_801, 1.5, "60", nil, true, 1e300] {
            assertRelayError(.invalidPayload) { () throws(RelayError) in try EventValidator.shareLive(["room": "r", "durationSec": d]) }
        }
        assertRelayError(.invalidPayload) { () throws(RelayError) in try EventValidator.shareLive(["room": "r"]) }
        assertRelayError(.invalidPayload) { () throws(RelayError) in try EventValidator.shareLive(["durationSec": 60]) }
    }

    // MARK: - location update

    func testLocationUpdate() throws {
        let out = try EventValidator.locationUpdate(["room": "r", "lat": 48.85, "lng": 2.35, "accuracy": 10, "heading": 90, "x": 1])
        XCTAssertEqual(JSONWriter.string(out), #"{"room":"r","lat":48.85,"lng":2.35,"accuracy":10,"heading":90}"#)
        guard case .object(let pairs) = out else { return XCTFail("expected an object") }
        XCTAssertEqual(pairs.map(\.0), ["room", "lat", "lng", "accuracy", "heading"])
    }

    func testLocationUpdateOptionalFields() throws {
        let minimal = try EventValidator.locationUpdate(["room": "r", "lat": 0, "lng": 0])
        XCTAssertEqual(JSONWriter.string(minimal), #"{"room":"r","lat":0,"lng":0}"#)
        // null counts as absent for optional fields.
        let nulls = try EventValidator.locationUpdate(["room": "r", "lat": 1.5, "lng": -1.5, "accuracy": nil, "heading": nil])
        XCTAssertEqual(JSONWriter.string(nulls), #"{"room":"r","lat":1.5,"lng":-1.5}"#)
    }

    func testLocationUpdateBoundaries() throws {
        XCTAssertNoThrow(try EventValidator.locationUpdate(["room": "r", "lat": -90, "lng": -180]))
        XCTAssertNoThrow(try EventValidator.locationUpdate(["room": "r", "lat": 90, "lng": 180]))
        XCTAssertNoThrow(try EventValidator.locationUpdate(["room": "r", "lat": 0, "lng": 0, "accuracy": 0, "heading": 0]))
        XCTAssertNoThrow(try EventValidator.locationUpdate(["room": "r", "lat": 0, "lng": 0, "accuracy": 1_000_000, "heading": 360]))
    }

    func testLocationUpdateErrors() {
        let bad: [JSONValue] = [
            ["lat": 0, "lng": 0],
            ["room": "r", "lng": 0],
            ["room": "r", "lat": 0],
            ["room": "r", "lat": nil, "lng": 0],
            ["room": "r", "lat": "1", "lng": 0],
            ["room": "r", "lat": 90.0001, "lng": 0],
            ["room": "r", "lat": -90.5, "lng": 0],
            ["room": "r", "lat": 0, "lng": 180.5],
            ["room": "r", "lat": 0, "lng": -181],
            ["room": "r", "lat": 0, "lng": true],
            ["room": "r", "lat": 0, "lng": 0, "accuracy": -1],
            ["room": "r", "lat": 0, "lng": 0, "accuracy": 1_000_001],
            ["room": "r", "lat": 0, "lng": 0, "accuracy": "high"],
            ["room": "r", "lat": 0, "lng": 0, "heading": 360.5],
            ["room": "r", "lat": 0, "lng": 0, "heading": -0.1],
            ["room": "r", "lat": 0, "lng": 0, "heading": [1]],
            "not an object",
        ]
        for payload in bad {
            assertRelayError(.invalidPayload) { () throws(RelayError) in try EventValidator.locationUpdate(payload) }
        }
    }

    // MARK: - roomOnly and custom

    func testRoomOnlyDropsEverythingElse() throws {
        let out = try EventValidator.roomOnly(["room": "r", "from": "forged", "ts": 1, "x": [1]])
        XCTAssertEqual(JSONWriter.string(out), #"{"room":"r"}"#)
        assertRelayError(.invalidPayload) { () throws(RelayError) in try EventValidator.roomOnly(.null) }
    }

    func testCustomPassesTheObjectThrough() throws {
        let payload: JSONValue = ["room": "r", "vote": "yes", "nested": ["a": [1, 2]]]
        XCTAssertEqual(JSONWriter.string(try EventValidator.custom(payload)), JSONWriter.string(payload))
    }

    func testCustomErrors() {
        for payload: JSONValue in [.null, 5, "r", [["room": "r"]], ["vote": "yes"], ["room": ""], ["room": 1]] {
            assertRelayError(.invalidPayload) { () throws(RelayError) in try EventValidator.custom(payload) }
        }
    }

    func testCustomNonObjectMessage() {
        do {
            _ = try EventValidator.custom([1])
            XCTFail("expected an error")
        } catch {
            XCTAssertEqual(error, RelayError(.invalidPayload, "custom events carry a JSON object"))
        }
    }

    // MARK: - stamp

    func testStampAddsFromAndTsLast() {
        let out = EventValidator.stamp(["room": "r", "x": 1], from: "alice", ts: 1_700_000_000_000)
        XCTAssertEqual(JSONWriter.string(out), #"{"room":"r","x":1,"from":"alice","ts":1700000000000}"#)
    }

    func testStampReplacesForgedFields() {
        let forged: JSONValue = ["from": "mallory", "room": "r", "ts": 1, "from": "again"]
        let out = EventValidator.stamp(forged, from: "alice", ts: 42)
        XCTAssertEqual(JSONWriter.string(out), #"{"room":"r","from":"alice","ts":42}"#)
        XCTAssertEqual(out["from"], "alice")
        XCTAssertEqual(out["ts"], 42)
    }
}
