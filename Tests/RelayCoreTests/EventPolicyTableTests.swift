import XCTest
@testable import RelayCore

final class EventPolicyTableTests: XCTestCase {
    private func policy(_ name: String, custom: Bool = true) throws(RelayError) -> EventPolicy {
        try EventPolicyTable.policy(forClientEvent: name, customEventsEnabled: custom)
    }

    func testEveryKnownNameFitsTheGrammar() {
        XCTAssertEqual(EventPolicyTable.known.count, 20)
        for (name, policy) in EventPolicyTable.known {
            XCTAssertTrue(EventName.isValid(name), name)
            XCTAssertEqual(policy.name, name)
        }
    }

    func testRequests() throws {
        for name in ["room:join", "room:leave", "presence:list", "receipt:sync"] {
            let p = try policy(name)
            XCTAssertEqual(p.handling, .request, name)
            XCTAssertEqual(p.rateClass, .control, name)
            XCTAssertEqual(p.coalescing, EventPolicy.Coalescing.none, name)
        }
    }

    func testTyping() throws {
        for name in ["typing:start", "typing:stop"] {
            XCTAssertEqual(try policy(name), EventPolicy(name: name, kind: name == "typing:start" ? .typingStart : .typingStop, handling: .typing, coalescing: .perRoomUser, rateClass: .typing))
        }
    }

    func testRoomBroadcasts() throws {
        XCTAssertEqual(try policy("message:reaction"), EventPolicy(name: "message:reaction", kind: .reaction, handling: .roomBroadcast, rateClass: .reaction))
        XCTAssertEqual(try policy("location:share-live"), EventPolicy(name: "location:share-live", kind: .shareLive, handling: .roomBroadcast, rateClass: .location))
        XCTAssertEqual(
            try policy("location:update"),
            EventPolicy(name: "location:update", kind: .locationUpdate, handling: .roomBroadcast, coalescing: .perRoomSender, rateClass: .location))
        XCTAssertEqual(try policy("location:stop"), EventPolicy(name: "location:stop", kind: .locationStop, handling: .roomBroadcast, rateClass: .location))
    }

    func testReceipts() throws {
        for name in ["message:delivered", "message:read"] {
            XCTAssertEqual(try policy(name), EventPolicy(name: name, kind: name == "message:read" ? .read : .delivered, handling: .receipt, rateClass: .receipt))
        }
    }

    func testServerOnlyEventsAreRefused() {
        for name in ["presence:join", "presence:leave", "notification:new", "message:new"] {
            XCTAssertEqual(EventPolicyTable.known[name]?.handling, .serverOnly, name)
            assertRelayError(.eventNotAllowed) { () throws(RelayError) in try policy(name) }
            // Even with custom events off the answer is the same.
            assertRelayError(.eventNotAllowed) { () throws(RelayError) in try policy(name, custom: false) }
        }
        XCTAssertEqual(EventPolicyTable.known["presence:join"]?.coalescing, .perRoomUser)
        XCTAssertEqual(EventPolicyTable.known["presence:leave"]?.coalescing, .perRoomUser)
    }

    func testCustomEvents() throws {
        let p = try policy("poll:vote-cast")
        XCTAssertEqual(p, EventPolicy(name: "poll:vote-cast", kind: .custom, handling: .roomBroadcast, coalescing: .none, rateClass: .custom))
        XCTAssertEqual(EventPolicyTable.custom("x:y"), EventPolicy(name: "x:y", kind: .custom, handling: .roomBroadcast, rateClass: .custom))
    }

    func testCustomEventsDisabled() throws {
        assertRelayError(.customEventsDisabled) { () throws(RelayError) in try policy("poll:vote", custom: false) }
        // Known client events still work.
        XCTAssertEqual(try policy("typing:start", custom: false).handling, .typing)
    }

    func testInvalidNamesAreRefusedFirst() {
        for name in ["error", "Typing:start", "typing_start", "", "a:b:c", String(repeating: "a", count: 70) + ":b"] {
            assertRelayError(.invalidEventName) { () throws(RelayError) in try policy(name) }
            assertRelayError(.invalidEventName) { () throws(RelayError) in try policy(name, custom: false) }
        }
    }

    func testInvalidNameMessageIsTruncated() {
        let long = String(repeating: "x", count: 1000)
        do {
            _ = try policy(long)
            XCTFail("expected an error")
        } catch {
            XCTAssertEqual(error.code, .invalidEventName)
            XCTAssertEqual(error.message, "invalid event name: " + String(repeating: "x", count: 64))
        }
    }

    func testRateClasses() {
        XCTAssertEqual(Set(RateClass.allCases), [.control, .typing, .reaction, .location, .receipt, .custom])
        XCTAssertEqual(RateClass.location.rawValue, "location")
    }

    func testCoalescingKeysComeFromTheTable() throws {
        XCTAssertEqual(try policy("typing:start").coalescingKey(room: "r", user: "u"), try policy("typing:stop").coalescingKey(room: "r", user: "u"))
        XCTAssertEqual(try policy("typing:start").coalescingKey(room: "r", user: "u")?.event, "typing")
        XCTAssertEqual(try policy("location:update").coalescingKey(room: "r", user: "u")?.event, "location:update")
        XCTAssertNil(try policy("message:reaction").coalescingKey(room: "r", user: "u"))
        XCTAssertTrue(try policy("message:read").isDurable)
        XCTAssertFalse(try policy("message:reaction").isDurable)
        XCTAssertEqual(EventPolicyTable.known["presence:join"]?.coalescingKey(room: "r", user: "u"), EventPolicyTable.known["presence:leave"]?.coalescingKey(room: "r", user: "u"))
    }
}
