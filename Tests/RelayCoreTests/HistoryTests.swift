import RelayTestSupport
import XCTest
@testable import RelayCore

final class StreamOffsetTests: XCTestCase {
    func testParsesFormatsAndOrders() {
        XCTAssertEqual(StreamOffset(id: "1700000000123-4"), StreamOffset(ms: 1_700_000_000_123, seq: 4))
        XCTAssertEqual(StreamOffset(ms: 5, seq: 0).description, "5-0")
        XCTAssertLessThan(StreamOffset(ms: 5, seq: 9), StreamOffset(ms: 6, seq: 0))
        XCTAssertLessThan(StreamOffset(ms: 5, seq: 1), StreamOffset(ms: 5, seq: 2))
        for bad in ["", "-", "1-", "-1", "1-2-3", "a-1", "1-b", "+1-2", "99999999999999999999-0", "123456789012345678901-0", " 1-2"] {
            XCTAssertNil(StreamOffset(id: bad), bad)
        }
    }

    func testNextNeverGoesBack() {
        let o = StreamOffset(ms: 100, seq: 0)
        XCTAssertEqual(o.next(wallMs: 101), StreamOffset(ms: 101, seq: 0))
        XCTAssertEqual(o.next(wallMs: 100), StreamOffset(ms: 100, seq: 1))
        // The clock stepped back: the counter advances instead.
        XCTAssertEqual(o.next(wallMs: 50), StreamOffset(ms: 100, seq: 1))
        XCTAssertEqual(StreamOffset.zero.next(wallMs: -5), StreamOffset(ms: 0, seq: 1))
    }

    func testWireOffsetNamesItsStream() {
        let room = StreamKey.room("conversation:1")
        let wire = WireOffset(StreamOffset(ms: 17, seq: 3), stream: room)
        XCTAssertEqual(WireOffset(wire.description), wire)
        XCTAssertEqual(wire.description.count, "17-3:".count + 8)
        XCTAssertNotEqual(StreamKey.room("a").tag, StreamKey.user("a").tag)
        XCTAssertEqual(StreamKey(name: room.name), room)
        XCTAssertEqual(StreamKey(name: "u:bob"), .user("bob"))
        XCTAssertNil(StreamKey(name: "x:bob"))
        for bad in ["17-3", "17-3:", "17-3:ABCDEF01", "17-3:abcdef0", "17-3:abcdef012", "x-3:abcdef01", String(repeating: "1", count: 60) + "-3:abcdef01"] {
            XCTAssertNil(WireOffset(bad), bad)
        }
    }
}

final class StreamHistoryTests: XCTestCase {
    func testReadsAfterAnOffsetInPages() throws {
        var h = StreamHistory<String>()
        let a = h.append("a", bytes: 10, wallMs: 1000)
        let b = h.append("b", bytes: 10, wallMs: 1000)
        let c = h.append("c", bytes: 10, wallMs: 1001)
        XCTAssertEqual([a, b, c], [StreamOffset(ms: 1000, seq: 0), StreamOffset(ms: 1000, seq: 1), StreamOffset(ms: 1001, seq: 0)])
        XCTAssertEqual(try h.read(after: .zero, limit: 10).get().entries.map(\.item), ["a", "b", "c"])
        XCTAssertEqual(try h.read(after: a, limit: 10).get().entries.map(\.item), ["b", "c"])
        let page = try h.read(after: a, limit: 1).get()
        XCTAssertEqual(page.entries.map(\.item), ["b"])
        XCTAssertTrue(page.more)
        XCTAssertEqual(page.head, c)
        XCTAssertEqual(try h.read(after: c, limit: 10).get().entries.count, 0)
        // A byte bound stops a page (but never before its first event).
        XCTAssertEqual(try h.read(after: .zero, limit: 10, maxBytes: 15).get().entries.map(\.item), ["a"])
        XCTAssertEqual(try h.read(after: .zero, limit: 10, maxBytes: 1).get().entries.map(\.item), ["a"])
    }

    func testAnswersOnlyWhenEverythingAfterTheOffsetIsKept() {
        var h = StreamHistory<Int>()
        let offsets = (0..<5).map { h.append($0, bytes: 1, wallMs: 10 + Int64($0)) }
        XCTAssertTrue(h.reaches(.zero))
        h.evictOldest()
        h.evictOldest()
        XCTAssertFalse(h.reaches(.zero), "the start of a stream that lost events")
        XCTAssertFalse(h.reaches(offsets[0]))
        XCTAssertTrue(h.reaches(offsets[1]), "the newest evicted event: everything after it is kept")
        XCTAssertTrue(h.reaches(offsets[3]))
        XCTAssertTrue(h.reaches(offsets[4]))
        XCTAssertFalse(h.reaches(StreamOffset(ms: 12, seq: 7)), "an offset this stream never gave out")
        XCTAssertFalse(h.reaches(StreamOffset(ms: 99, seq: 0)), "an offset from the future (another incarnation)")
        XCTAssertEqual(h.read(after: offsets[0], limit: 10).map(\.entries.count), .failure(.unavailable))
    }
}

final class HistoryStoreTests: XCTestCase {
    func testKeepsTheLastEventsOfEachStream() throws {
        var store = HistoryStore<Int>(limits: HistoryLimits.testing(maxEvents: 3, maxAgeMs: 10_000, maxBytes: 1 << 20))
        let room = StreamKey.room("r")
        var offsets: [StreamOffset] = []
        for i in 0..<5 { offsets.append(store.append(i, bytes: 10, to: room, wallMs: 100 + Int64(i))) }
        XCTAssertEqual(try store.read(room, after: offsets[1], limit: 10).get().entries.map(\.item), [2, 3, 4])
        XCTAssertEqual(store.read(room, after: offsets[0], limit: 10).map(\.entries.count), .failure(.unavailable))
        XCTAssertEqual(store.totalEvents, 3)
        XCTAssertEqual(store.totalBytes, 30)
        XCTAssertEqual(store.head(of: room), offsets[4])
        XCTAssertEqual(store.head(of: .room("other")), .zero)
    }

    func testAgeLimitAndIdleStreamsAreForgotten() {
        var store = HistoryStore<Int>(limits: HistoryLimits.testing(maxEvents: 100, maxAgeMs: 1_000, maxBytes: 1 << 20))
        let room = StreamKey.room("r")
        let old = store.append(1, bytes: 10, to: room, wallMs: 1_000)
        _ = store.append(2, bytes: 10, to: .room("busy"), wallMs: 2_500)
        XCTAssertEqual(store.totalEvents, 1)
        XCTAssertEqual(store.streamCount, 1, "the idle, empty stream is forgotten")
        // A client's offset of the forgotten stream is unknown to its next incarnation.
        _ = store.append(3, bytes: 10, to: room, wallMs: 2_600)
        XCTAssertEqual(store.read(room, after: old, limit: 10).map(\.entries.count), .failure(.unavailable))
    }

    func testByteBudgetDropsTheOldestEventsOfAnyStream() throws {
        var store = HistoryStore<Int>(limits: HistoryLimits.testing(maxEvents: 100, maxAgeMs: 60_000, maxBytes: 100))
        let a = StreamKey.room("a"), b = StreamKey.room("b")
        let a0 = store.append(0, bytes: 40, to: a, wallMs: 1)
        _ = store.append(1, bytes: 40, to: b, wallMs: 2)
        _ = store.append(2, bytes: 40, to: b, wallMs: 3)
        XCTAssertLessThanOrEqual(store.totalBytes, 100)
        XCTAssertEqual(try store.read(a, after: a0, limit: 10).get().entries.count, 0, "a's head is still answerable")
        XCTAssertEqual(try store.read(b, after: .zero, limit: 10).get().entries.map(\.item), [1, 2])
        XCTAssertEqual(store.read(a, after: .zero, limit: 10).map(\.entries.count), .failure(.unavailable))
    }

    func testEachStreamIsBoundedInBytesAndKeepsItsNewestEvent() throws {
        var store = HistoryStore<Int>(limits: HistoryLimits.testing(maxEvents: 100, maxAgeMs: 60_000, maxBytes: 1 << 20, maxStreamBytes: 100))
        let busy = StreamKey.room("busy"), quiet = StreamKey.room("quiet")
        _ = store.append(0, bytes: 10, to: quiet, wallMs: 1)
        for i in 0..<50 { _ = store.append(i, bytes: 30, to: busy, wallMs: 2) }
        XCTAssertEqual(store.read(busy, after: .zero, limit: 100).map(\.entries.count), .failure(.unavailable), "the oldest were evicted")
        XCTAssertEqual(store.totalBytes, 10 + 90, "the busy room holds at most 100 bytes; the quiet one is untouched")
        XCTAssertEqual(try store.read(quiet, after: .zero, limit: 10).get().entries.map(\.item), [0])
        // One event over the stream bound is still kept (the newest always stays).
        _ = store.append(99, bytes: 500, to: busy, wallMs: 3)
        XCTAssertEqual(store.totalBytes, 10 + 500)
    }

    /// Random appends over a few streams under all three limits: the store's totals always
    /// equal what its streams hold, and each stream holds its newest events, in order.
    func testTotalsMatchWhatTheStreamsHoldUnderRandomAppends() {
        let limits = HistoryLimits.testing(maxEvents: 5, maxAgeMs: 400, maxBytes: 600)
        var store = HistoryStore<Int>(limits: limits)
        var state: UInt64 = 0x2545_F491_4F6C_DD1D
        func next(_ bound: UInt64) -> Int {
            state ^= state << 13; state ^= state >> 7; state ^= state << 17
            return Int(state % bound)
        }
        var now: Int64 = 1_000
        var appended: [StreamKey: [(offset: StreamOffset, item: Int, bytes: Int)]] = [:]
        for i in 0..<8_000 {
            now += Int64(next(40))
            let stream = StreamKey.room("r\(next(6))")
            let size = 1 + next(90)
            let offset = store.append(i, bytes: size, to: stream, wallMs: now)
            appended[stream, default: []].append((offset, i, size))
            guard i % 50 == 0 else { continue }
            var bytes = 0
            var events = 0
            for (stream, list) in appended {
                // Everything the stream holds: the page after the newest offset it lost (the
                // first, oldest first, that can be read after), or after zero if it lost none.
                let starts = [StreamOffset.zero] + list.map(\.offset)
                let page = starts.lazy.compactMap { try? store.read(stream, after: $0, limit: 100).get() }.first
                let kept = page?.entries.map(\.item) ?? []
                let newest = list.suffix(kept.count)
                XCTAssertLessThanOrEqual(kept.count, limits.maxEvents)
                XCTAssertEqual(kept, newest.map(\.item), "\(stream): the newest, in order")
                bytes += newest.reduce(0) { $0 + $1.bytes }
                events += kept.count
            }
            XCTAssertEqual(store.totalBytes, bytes, "after \(i + 1) appends")
            XCTAssertEqual(store.totalEvents, events, "after \(i + 1) appends")
            XCTAssertLessThanOrEqual(store.totalBytes, limits.maxBytes)
        }
    }

    func testStaysBoundedUnderALongFlood() {
        var store = HistoryStore<Int>(limits: HistoryLimits.testing(maxEvents: 10, maxAgeMs: 1_000_000, maxBytes: 1 << 30))
        for i in 0..<200_000 {
            _ = store.append(i, bytes: 8, to: .room("r\(i % 7)"), wallMs: Int64(i))
        }
        XCTAssertEqual(store.totalEvents, 70)
        XCTAssertLessThanOrEqual(store.orderCount, 2 * 1024 + 1)
    }
}

final class RecoveryLogTests: XCTestCase {
    let room = StreamKey.room("r"), other = StreamKey.room("o"), me = StreamKey.user("alice")
    func o(_ ms: UInt64, _ seq: UInt64 = 0) -> StreamOffset { StreamOffset(ms: ms, seq: seq) }

    func testCutsFollowTheOrderEventsWereQueued() throws {
        var log = RecoveryLog(maxRuns: 8)
        log.follow(room, from: o(10))
        log.follow(other, from: o(5))
        log.follow(me, from: .zero)
        log.record(room, o(11))
        log.record(room, o(12))
        log.record(other, o(6))
        log.record(room, o(13))
        XCTAssertEqual(log.runs.count, 3, "consecutive events of one stream share a run")
        // Received up to room@12: other's 6 and room's 13 were queued after it.
        let cuts = try XCTUnwrap(log.cuts(lastReceived: WireOffset(o(12), stream: room)))
        XCTAssertEqual(cuts, [room: o(12), other: o(5), me: .zero])
        let later = try XCTUnwrap(log.cuts(lastReceived: WireOffset(o(6), stream: other)))
        XCTAssertEqual(later, [room: o(12), other: o(6), me: .zero])
        XCTAssertEqual(log.cuts(lastReceived: nil), [room: o(10), other: o(5), me: .zero], "received nothing: everything since joining")
    }

    func testAnUnknownOffsetCannotBePlaced() {
        var log = RecoveryLog(maxRuns: 8)
        log.follow(room, from: o(10))
        log.record(room, o(11))
        XCTAssertNil(log.cuts(lastReceived: WireOffset(o(9), stream: room)), "before the socket joined")
        XCTAssertNil(log.cuts(lastReceived: WireOffset(o(50), stream: room)), "never sent")
        XCTAssertNil(log.cuts(lastReceived: WireOffset(o(11), stream: .room("elsewhere"))), "a stream it does not follow")
    }

    func testOldRunsFoldIntoTheBase() {
        var log = RecoveryLog(maxRuns: 2)
        log.follow(room, from: .zero)
        log.follow(other, from: .zero)
        log.record(room, o(1))
        log.record(other, o(2))
        log.record(room, o(3))
        XCTAssertEqual(log.runs.count, 2)
        XCTAssertTrue(log.folded)
        XCTAssertEqual(log.base[room], o(1))
        XCTAssertNil(log.cuts(lastReceived: WireOffset(o(1), stream: room)), "older than the log")
        XCTAssertNil(log.cuts(lastReceived: nil), "received nothing, but the log no longer starts at joining")
        XCTAssertEqual(log.cuts(lastReceived: WireOffset(o(2), stream: other)), [room: o(1), other: o(2)])
    }

    func testAJoinTakesTheLiveEventsThatRacedItsHeadRead() throws {
        var log = RecoveryLog(maxRuns: 8)
        // Joined, then the head read as 12: events 11 and 12 were published after the socket was
        // in the room's fan-out and are still on their way to it live.
        log.join(room, at: o(12))
        XCTAssertTrue(log.record(room, o(11)), "live, though at or before the head read")
        XCTAssertTrue(log.record(room, o(12)))
        XCTAssertFalse(log.record(room, o(12)), "a second copy is still a duplicate")
        XCTAssertTrue(log.record(room, o(13)))
        let cuts = try XCTUnwrap(log.cuts(lastReceived: WireOffset(o(11), stream: room)))
        XCTAssertEqual(cuts[room], o(11))
        // Following (CONNECT, recovery) keeps refusing what the socket already has.
        var followed = RecoveryLog(maxRuns: 8)
        followed.follow(room, from: o(12))
        XCTAssertFalse(followed.record(room, o(11)))
        // Once the first live event came, the join is over.
        var joined = RecoveryLog(maxRuns: 8)
        joined.join(room, at: o(12))
        XCTAssertTrue(joined.record(room, o(14)))
        XCTAssertFalse(joined.record(room, o(13)))
    }

    func testUnfollowForgetsTheStream() {
        var log = RecoveryLog()
        log.follow(room, from: .zero)
        log.record(room, o(1))
        log.unfollow(room)
        log.record(room, o(2))
        XCTAssertTrue(log.runs.isEmpty)
        XCTAssertEqual(log.streams, [])
    }

    func testRecordSurvivesJSON() throws {
        var log = RecoveryLog(maxRuns: 4)
        log.follow(room, from: o(1, 2))
        log.follow(me, from: .zero)
        log.record(room, o(3))
        log.record(me, o(4, 1))
        let record = KeptSession(pid: "p", socketSID: "s", userID: "alice", rooms: ["r"], log: log, disconnectedAtMs: 99)
        let text = JSONWriter.string(record.json)
        XCTAssertEqual(KeptSession(json: try JSONParser.parse(text)), record)
        XCTAssertNil(KeptSession(json: .object([("p", "x")])))
        XCTAssertNil(KeptSession(json: try JSONParser.parse(text.replacingOccurrences(of: "\"r:r\"", with: "\"q:r\""))))
    }
}

final class ConnectRequestTests: XCTestCase {
    func parse(_ text: String, maxRooms: Int = 3) throws(RelayError) -> ConnectRequest {
        let json = try? JSONParser.parse(text)
        return try ConnectRequest(data: json, fallbackToken: "fallback", maxRooms: maxRooms)
    }

    func testReadsTokenRecoveryAndRooms() throws {
        XCTAssertEqual(try parse("{\"token\":\"t\"}"), ConnectRequest(token: "t"))
        XCTAssertEqual(try parse("{}"), ConnectRequest(token: "fallback"))
        XCTAssertTrue(try parse("{\"token\":\"t\",\"recover\":true}").wantsRecovery)
        XCTAssertFalse(try parse("{\"token\":\"t\",\"recover\":\"yes\"}").wantsRecovery)
        let back = try parse("{\"token\":\"t\",\"pid\":\"P\",\"offset\":\"5-1:0000000a\"}")
        XCTAssertTrue(back.wantsRecovery, "a pid means the client speaks recovery")
        XCTAssertEqual(back.pid, "P")
        XCTAssertEqual(back.offset, WireOffset(offset: StreamOffset(ms: 5, seq: 1), tag: 10))
        XCTAssertNil(try parse("{\"token\":\"t\",\"pid\":\"P\",\"offset\":\"junk\"}").offset)
        XCTAssertTrue(try parse("{\"token\":\"t\",\"pid\":\"P\",\"offset\":\"junk\"}").offsetIsInvalid)
        XCTAssertTrue(try parse("{\"token\":\"t\",\"pid\":\"P\",\"offset\":12}").offsetIsInvalid)
        XCTAssertFalse(try parse("{\"token\":\"t\",\"pid\":\"P\"}").offsetIsInvalid)
        XCTAssertEqual(try parse("{\"token\":\"t\",\"rooms\":[\"a\",\"b\",\"a\"]}").rooms, ["a", "b"])
    }

    func testRefusesBadRooms() {
        XCTAssertThrowsError(try parse("{\"token\":\"t\",\"rooms\":[\"a\",\"b\",\"c\",\"d\"]}")) { XCTAssertEqual(($0 as? RelayError)?.code, .tooManyRooms) }
        for bad in ["\"a\"", "[1]", "[\"has space\"]", "[\"\"]", "{}"] {
            XCTAssertThrowsError(try parse("{\"token\":\"t\",\"rooms\":\(bad)}"), bad) { XCTAssertEqual(($0 as? RelayError)?.code, .invalidPayload) }
        }
    }

    func testAnswerCarriesPidAndRoomsOnlyWhenThereAreAny() {
        let alice = AuthenticatedUser(userID: "alice", rooms: RoomAuthorization(patterns: ["*"]), expiresAt: 0)
        XCTAssertEqual(JSONWriter.string(ConnectAnswer(user: alice).json(sid: "S")), "{\"sid\":\"S\"}")
        let full = ConnectAnswer(user: alice, pid: "P", recovered: true, rooms: [("r", "1-0:00000001")], refused: [("x", "room_not_authorized")])
        XCTAssertEqual(
            JSONWriter.string(full.json(sid: "S")),
            "{\"sid\":\"S\",\"pid\":\"P\",\"recovered\":true,\"rooms\":{\"r\":\"1-0:00000001\"},\"refused\":{\"x\":\"room_not_authorized\"}}")
    }
}

final class RecoverableEventsTests: XCTestCase {
    func testThePolicyTableSaysWhatIsKept() {
        for name in ["message:reaction", "location:share-live", "location:stop", "message:delivered", "message:read", "notification:new", "message:new", "chat:tick"] {
            XCTAssertTrue(EventPolicyTable.backend(name).isRecoverable, name)
        }
        // Presence says what is true now; kept, it would push chat events out of history.
        for name in ["presence:join", "presence:leave"] {
            XCTAssertFalse(EventPolicyTable.backend(name).isRecoverable, name)
        }
        // ("error" is no event name at all: refused before any policy is asked.)
        XCTAssertFalse(EventName.isValid("error"))
        for name in ["typing:start", "typing:stop", "location:update", "room:join", "room:sync", "receipt:sync"] {
            XCTAssertFalse(EventPolicyTable.backend(name).isRecoverable, name)
        }
    }
}

final class RevocationListTests: XCTestCase {
    func testRefusesOlderTokensForItsTimeToLive() {
        var list = RevocationList(ttlSeconds: 100, maxEntries: 2)
        list.revoke("alice", issuedBefore: 1_000, now: 1_000)
        XCTAssertTrue(list.isRevoked("alice", issuedAt: 999, now: 1_001))
        XCTAssertFalse(list.isRevoked("alice", issuedAt: 1_000, now: 1_001), "a token of the revocation's second is new")
        XCTAssertTrue(list.isRevoked("alice", issuedAt: nil, now: 1_001), "no iat: cannot prove it is newer")
        XCTAssertFalse(list.isRevoked("bob", issuedAt: 1, now: 1_001))
        XCTAssertFalse(list.isRevoked("alice", issuedAt: 1, now: 1_100), "expired")
        list.revoke("bob", issuedBefore: 1_050, now: 1_050)
        list.revoke("carol", issuedBefore: 1_060, now: 1_060)
        XCTAssertEqual(list.count, 2, "bounded: the entry that expires first made room")
        XCTAssertTrue(list.isRevoked("carol", issuedAt: 0, now: 1_061))
        var huge = RevocationList(ttlSeconds: .max)
        huge.revoke("x", issuedBefore: .max, now: 0)
        XCTAssertTrue(huge.isRevoked("x", issuedAt: 0, now: 0))
    }
}

final class TokenExpiryTests: XCTestCase {
    func testDeadlinesNeverOverflow() {
        var s = EngineSession(configuration: SessionConfiguration.testing, transport: .websocket, engineSID: "E", socketSID: "S", now: 0)
        _ = s.start(now: 0)
        _ = s.receive(ArraySlice("40{\"token\":\"t\"}".utf8), from: .websocket, now: 1, wallMs: 1)
        let forever = AuthenticatedUser(userID: "a", rooms: RoomAuthorization(patterns: []), expiresAt: .max)
        _ = s.connectFinished(.success(ConnectAnswer(user: forever)), now: 1, wallMs: .max)
        XCTAssertEqual(s.nextDeadline, 25_000, "only the heartbeat")
        let past = AuthenticatedUser(userID: "a", rooms: RoomAuthorization(patterns: []), expiresAt: -9_000_000_000_000_000)
        s.tokenRefreshed(past, now: 2, wallMs: .max)
        XCTAssertEqual(s.tick(now: 2).last, .close(code: CloseCode.tokenExpired, reason: "token expired"))
    }
}
