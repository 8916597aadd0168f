import NIOCore
import NIOEmbedded
import RelayCore
import XCTest

@testable import RelayServer

/// Connection state recovery, rooms in CONNECT and `room:sync`, frame by frame on one hub.
final class RecoveryTests: XCTestCase {
    /// Connects with `auth` (JSON object text); returns the CONNECT answer's data.
    func connect(_ s: Session, _ auth: String) throws -> JSONValue {
        _ = try s.texts()
        try s.send("40" + auth)
        let reply = try s.texts()
        let answer = try XCTUnwrap(reply.first { $0.hasPrefix("40{") }, "\(reply)")
        return try JSONParser.parse(String(answer.dropFirst(2)))
    }

    /// The events (`42[…]`) among `texts`, parsed.
    func events(_ texts: [String]) throws -> [[JSONValue]] {
        try texts.filter { $0.hasPrefix("42") }.map { text in
            guard case .array(let items) = try JSONParser.parse(String(text.dropFirst(2))) else { throw RelayError(.invalidPacket) }
            return items
        }
    }

    /// The payload of the ack `43<id>[payload]` among `texts`.
    func ack(_ id: Int, in texts: [String]) throws -> JSONValue {
        let text = try XCTUnwrap(texts.first { $0.hasPrefix("43\(id)[") }, "\(texts)")
        guard case .array(let items) = try JSONParser.parse(String(text.dropFirst(2 + String(id).count))), let first = items.first else {
            throw RelayError(.invalidPacket)
        }
        return first
    }

    func tick(_ s: Session, _ n: Int) throws {
        try s.send("42[\"chat:tick\",{\"room\":\"conversation:1\",\"n\":\(n)}]")
    }

    func numbers(_ events: [[JSONValue]]) -> [Int64] {
        events.filter { $0.first == "chat:tick" }.compactMap { $0[1]["n"]?.intValue }
    }

    /// The transport drops (no DISCONNECT); a socket the server closed already is left as is.
    func drop(_ s: Session) throws {
        do { try s.channel.close().wait() } catch ChannelError.alreadyClosed {}
        s.channel.embeddedEventLoop.run()
    }

    func testOptedInSocketsGetAPidAndOffsetsOthersExactlyTheirArguments() throws {
        let h = Harness()
        let alice = try h.session(), bob = try h.session(), carol = try h.session()
        let a = try connect(alice, "{\"token\":\"alice\",\"recover\":true,\"rooms\":[\"conversation:1\"]}")
        XCTAssertNotNil(a["pid"]?.stringValue)
        XCTAssertEqual(a["recovered"], false)
        let offset = try XCTUnwrap(a["rooms"]?["conversation:1"]?.stringValue)
        XCTAssertNotNil(WireOffset(offset))
        let c = try connect(carol, "{\"token\":\"carol\",\"rooms\":[\"conversation:1\"]}")
        XCTAssertNil(c["pid"], "no pid for a socket that did not opt in")
        XCTAssertNil(c["recovered"])
        _ = try connect(bob, "{\"token\":\"bob\",\"rooms\":[\"conversation:1\"]}")
        _ = try alice.texts()
        _ = try carol.texts()
        try tick(bob, 1)
        let toAlice = try events(alice.texts())
        let toCarol = try events(carol.texts())
        XCTAssertEqual(toAlice.count, 1)
        XCTAssertEqual(toAlice[0].count, 3, "name, payload, offset")
        XCTAssertNotNil(toAlice[0].last?.stringValue.flatMap { WireOffset($0) })
        XCTAssertEqual(toCarol.map(\.count), [2], "exactly the arguments it always had")
        XCTAssertEqual(toAlice[0][1], toCarol[0][1])
    }

    func testARecoveredSocketGetsWhatItMissedInOrderBeforeAnythingNew() throws {
        let h = Harness()
        let alice = try h.session(), bob = try h.session()
        let first = try connect(alice, "{\"token\":\"alice\",\"recover\":true,\"rooms\":[\"conversation:1\"]}")
        _ = try connect(bob, "{\"token\":\"bob\",\"rooms\":[\"conversation:1\"]}")
        _ = try alice.texts()
        for n in 1...3 { try tick(bob, n) }
        let seen = try events(alice.texts())
        XCTAssertEqual(numbers(seen), [1, 2, 3])
        // The client got 1 and 2 only: 3 was lost with the transport.
        let lastReceived = try XCTUnwrap(seen[1].last?.stringValue)
        try drop(alice)
        for n in 4...5 { try tick(bob, n) }

        let back = try h.session()
        _ = try back.texts()
        let pid = try XCTUnwrap(first["pid"]?.stringValue)
        try back.send("40{\"token\":\"alice\",\"pid\":\"\(pid)\",\"offset\":\"\(lastReceived)\"}")
        let replies = try back.texts()
        let answer = try JSONParser.parse(String(try XCTUnwrap(replies.first).dropFirst(2)))
        XCTAssertEqual(answer["recovered"], true)
        XCTAssertEqual(answer["sid"], first["sid"], "the same sid")
        XCTAssertEqual(answer["pid"], first["pid"])
        XCTAssertNotNil(answer["rooms"]?["conversation:1"], "back in its room without room:join")
        let missed = try events(Array(replies.dropFirst()))
        XCTAssertEqual(numbers(missed), [3, 4, 5], "\(replies)")
        let offsets = missed.compactMap { $0.last?.stringValue.flatMap { WireOffset($0)?.offset } }
        XCTAssertEqual(offsets, offsets.sorted())
        // New events come after, with nothing repeated.
        try tick(bob, 6)
        XCTAssertEqual(numbers(try events(back.texts())), [6])
        XCTAssertEqual(h.relay.hub.metrics.counterValue("relay_recoveries_total", [("result", "recovered")]), 1)
    }

    func testItsOwnBroadcastsAreNotReplayed() throws {
        let h = Harness()
        let alice = try h.session(), bob = try h.session()
        let first = try connect(alice, "{\"token\":\"alice\",\"recover\":true,\"rooms\":[\"conversation:1\"]}")
        _ = try connect(bob, "{\"token\":\"bob\",\"rooms\":[\"conversation:1\"]}")
        _ = try alice.texts()
        try tick(alice, 100)
        try tick(bob, 1)
        try drop(alice)
        let back = try h.session()
        let answer = try connect(back, "{\"token\":\"alice\",\"pid\":\"\(try XCTUnwrap(first["pid"]?.stringValue))\"}")
        XCTAssertEqual(answer["recovered"], true)
        XCTAssertEqual(numbers(try events(back.texts())), [], "1 was written before the drop; 100 is its own")
    }

    func testReceivedNothingReplaysEverythingSinceItJoined() throws {
        let h = Harness()
        let alice = try h.session(), bob = try h.session()
        let first = try connect(alice, "{\"token\":\"alice\",\"recover\":true,\"rooms\":[\"conversation:1\"]}")
        _ = try connect(bob, "{\"token\":\"bob\",\"rooms\":[\"conversation:1\"]}")
        try tick(bob, 1)
        try drop(alice)
        try tick(bob, 2)
        let back = try h.session()
        _ = try back.texts()
        try back.send("40{\"token\":\"alice\",\"pid\":\"\(try XCTUnwrap(first["pid"]?.stringValue))\"}")
        let replies = try back.texts()
        XCTAssertTrue(replies.first?.contains("\"recovered\":true") ?? false, "\(replies)")
        XCTAssertEqual(numbers(try events(replies)), [1, 2])
    }

    func testNeverRecoveredWhenItCannotBeExact() throws {
        let h = Harness { $0.recovery.historyLimits.maxEvents = 3 }
        let alice = try h.session(), bob = try h.session()
        let first = try connect(alice, "{\"token\":\"alice\",\"recover\":true,\"rooms\":[\"conversation:1\"]}")
        _ = try connect(bob, "{\"token\":\"bob\",\"rooms\":[\"conversation:1\"]}")
        try tick(bob, 1)
        let last = try XCTUnwrap(try events(alice.texts()).last?.last?.stringValue)
        try drop(alice)
        for n in 2...10 { try tick(bob, n) }
        let pid = try XCTUnwrap(first["pid"]?.stringValue)
        let back = try h.session()
        let answer = try connect(back, "{\"token\":\"alice\",\"pid\":\"\(pid)\",\"offset\":\"\(last)\"}")
        XCTAssertEqual(answer["recovered"], false, "the history no longer reaches back")
        XCTAssertNotEqual(answer["sid"], first["sid"])
        XCTAssertNil(answer["rooms"], "no rooms restored")
        XCTAssertEqual(numbers(try events(back.texts())), [], "nothing replayed")
        XCTAssertNotNil(answer["pid"], "a new session, still opted in")
        XCTAssertEqual(h.relay.hub.metrics.counterValue("relay_recoveries_total", [("result", "history_gone")]), 1)

        // A session is recovered at most once, and an unknown pid is a new session.
        let again = try h.session()
        XCTAssertEqual(try connect(again, "{\"token\":\"alice\",\"pid\":\"\(pid)\"}")["recovered"], false)
        XCTAssertEqual(h.relay.hub.metrics.counterValue("relay_recoveries_total", [("result", "unknown_session")]), 1)
    }

    func testAuthenticationIsNeverSkipped() throws {
        let h = Harness()
        let alice = try h.session()
        let first = try connect(alice, "{\"token\":\"alice\",\"recover\":true,\"rooms\":[\"conversation:1\"]}")
        let pid = try XCTUnwrap(first["pid"]?.stringValue)
        try drop(alice)
        let forged = try h.session()
        _ = try forged.texts()
        try forged.send("40{\"token\":\"not-a-token\",\"pid\":\"\(pid)\"}")
        XCTAssertTrue(try forged.texts().contains { $0.hasPrefix("44") }, "a bad token is refused, pid or not")
        let bob = try h.session()
        let answer = try connect(bob, "{\"token\":\"bob\",\"pid\":\"\(pid)\"}")
        XCTAssertEqual(answer["recovered"], false, "another user never takes a session")
        XCTAssertNotEqual(answer["sid"], first["sid"])
        XCTAssertEqual(h.relay.hub.metrics.counterValue("relay_recoveries_total", [("result", "user_mismatch")]), 1)
        // The attempt left the session in place: its owner still recovers it.
        let owner = try h.session()
        XCTAssertEqual(try connect(owner, "{\"token\":\"alice\",\"pid\":\"\(pid)\"}")["recovered"], true)
    }

    func testAClientDisconnectOrAnExpiredWindowIsNotRecovered() throws {
        let h = Harness { $0.recovery.windowMs = 1_000 }
        let alice = try h.session()
        let left = try connect(alice, "{\"token\":\"alice\",\"recover\":true}")
        try alice.send("41")
        try drop(alice)
        XCTAssertEqual(try connect(try h.session(), "{\"token\":\"alice\",\"pid\":\"\(try XCTUnwrap(left["pid"]?.stringValue))\"}")["recovered"], false)

        let again = try h.session()
        let dropped = try connect(again, "{\"token\":\"alice\",\"recover\":true}")
        try drop(again)
        h.advance(ms: 1_001)
        XCTAssertEqual(try connect(try h.session(), "{\"token\":\"alice\",\"pid\":\"\(try XCTUnwrap(dropped["pid"]?.stringValue))\"}")["recovered"], false)
    }

    /// Why a socket ended decides whether its session is kept: a kick ends it for good; a
    /// reconnect that takes over a live connection (4009) gets it back.
    func testAKickEndsTheSessionATakeoverKeepsIt() throws {
        let h = Harness { $0.recovery.takeoverAfterMs = 1_000 }
        let alice = try h.session()
        let kicked = try connect(alice, "{\"token\":\"alice\",\"recover\":true,\"rooms\":[\"conversation:1\"]}")
        let socket = try XCTUnwrap(alice.channel.pipeline.syncOperations.handler(type: WebSocketTransport.self).session)
        socket.close(code: CloseCode.kicked, reason: "kicked")
        XCTAssertEqual(try alice.closeCode(), CloseCode.kicked)
        try drop(alice)
        XCTAssertEqual(h.relay.hub.metrics.counterValue("relay_disconnects_total", [("reason", "kicked")]), 1)
        let after = try connect(try h.session(), "{\"token\":\"alice\",\"pid\":\"\(try XCTUnwrap(kicked["pid"]?.stringValue))\"}")
        XCTAssertEqual(after["recovered"], false)

        let phone = try h.session()
        let live = try connect(phone, "{\"token\":\"alice\",\"recover\":true,\"rooms\":[\"conversation:1\"]}")
        h.advance(ms: 1_000)
        let back = try connect(try h.session(), "{\"token\":\"alice\",\"pid\":\"\(try XCTUnwrap(live["pid"]?.stringValue))\"}")
        XCTAssertEqual(back["recovered"], true)
        XCTAssertEqual(back["sid"], live["sid"])
        XCTAssertEqual(try phone.closeCode(), CloseCode.replaced)
        XCTAssertEqual(h.relay.hub.metrics.counterValue("relay_disconnects_total", [("reason", "replaced")]), 1)
    }

    func testRoomsInConnectAreJoinedBeforeTheAnswer() throws {
        let h = Harness()
        let bob = try h.session()
        let answer = try connect(bob, "{\"token\":\"bob\",\"rooms\":[\"conversation:1\",\"secret:1\"]}")
        XCTAssertNotNil(answer["rooms"]?["conversation:1"])
        XCTAssertEqual(answer["refused"]?["secret:1"], "room_not_authorized")
        XCTAssertTrue(h.relay.hub.rooms.isMember(room: "conversation:1", connection: ConnectionID(1)) || h.relay.hub.rooms.roomCount == 1)
        // Too many rooms: the CONNECT is refused.
        let greedy = try h.session()
        _ = try greedy.texts()
        let rooms = (0...100).map { "\"conversation:\($0)\"" }.joined(separator: ",")
        try greedy.send("40{\"token\":\"bob\",\"rooms\":[\(rooms)]}")
        XCTAssertTrue(try greedy.texts().contains { $0.hasPrefix("44") && $0.contains("too_many_rooms") })
    }

    func testRoomSyncPagesAndSaysWhenHistoryIsGone() throws {
        let h = Harness { $0.recovery.historyLimits.maxEvents = 5 }
        let alice = try h.session(), bob = try h.session()
        let a = try connect(alice, "{\"token\":\"alice\",\"rooms\":[\"conversation:1\"]}")
        _ = try connect(bob, "{\"token\":\"bob\",\"rooms\":[\"conversation:1\"]}")
        let start = try XCTUnwrap(a["rooms"]?["conversation:1"]?.stringValue)
        _ = try alice.texts()
        for n in 1...3 { try tick(bob, n) }
        _ = try alice.texts()
        // 1, 2, 3 (presence is not kept in history) — paged two at a time.
        try alice.send("421[\"room:sync\",{\"room\":\"conversation:1\",\"offset\":\"\(start)\",\"limit\":2}]")
        let page1 = try ack(1, in: alice.texts())
        XCTAssertEqual(page1["more"], true)
        guard case .array(let events1)? = page1["events"] else { return XCTFail("\(page1)") }
        XCTAssertEqual(events1.compactMap { event -> Int64? in
            guard case .array(let items) = event, items.count == 3 else { return nil }
            return items[1]["n"]?.intValue
        }, [1, 2], "chat events only: bob's presence:join is live, never in history")
        let next = try XCTUnwrap(page1["offset"]?.stringValue)
        try alice.send("422[\"room:sync\",{\"room\":\"conversation:1\",\"offset\":\"\(next)\"}]")
        let page2 = try ack(2, in: alice.texts())
        XCTAssertEqual(page2["more"], false)
        guard case .array(let events2)? = page2["events"] else { return XCTFail("\(page2)") }
        XCTAssertEqual(events2.compactMap { event -> Int64? in
            guard case .array(let items) = event, items.count == 3 else { return nil }
            return items[1]["n"]?.intValue
        }, [3])

        for n in 4...20 { try tick(bob, n) }
        try alice.send("423[\"room:sync\",{\"room\":\"conversation:1\",\"offset\":\"\(next)\"}]")
        XCTAssertTrue(try alice.texts().contains { $0.hasPrefix("433") && $0.contains("history_unavailable") })
        try alice.send("424[\"room:sync\",{\"room\":\"conversation:1\",\"offset\":\"nonsense\"}]")
        XCTAssertTrue(try alice.texts().contains { $0.hasPrefix("434") && $0.contains("invalid_payload") })
        try alice.send("425[\"room:sync\",{\"room\":\"conversation:2\",\"offset\":\"\(next)\"}]")
        XCTAssertTrue(try alice.texts().contains { $0.hasPrefix("435") && $0.contains("invalid_payload") }, "an offset of another room")
    }
}
