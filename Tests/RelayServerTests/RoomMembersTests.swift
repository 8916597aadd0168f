import NIOCore
import NIOEmbedded
import RelayCore
import XCTest

@testable import RelayServer

/// A room's dense member list (`RoomMembers`) and the fan-out walk over it, prefetching ahead.
final class RoomMembersTests: XCTestCase {
    /// Random inserts, re-inserts and removals agree with a dictionary at every step, and every
    /// entry's address is its sink's.
    func testMatchesADictionaryUnderRandomChanges() {
        var members = RoomMembers()
        var model: [ConnectionID: RecordingSink] = [:]
        var state: UInt64 = 0x9E37_79B9_7F4A_7C15
        func next(_ bound: UInt64) -> UInt64 {
            state ^= state << 13; state ^= state >> 7; state ^= state << 17
            return state % bound
        }
        for _ in 0..<5000 {
            let id = next(64) + 1
            if next(3) == 0 {
                members.remove(ConnectionID(id))
                model.removeValue(forKey: ConnectionID(id))
            } else {
                let sink = RecordingSink(id)
                members.insert(sink)
                model[ConnectionID(id)] = sink
            }
            XCTAssertEqual(members.count, model.count)
            XCTAssertEqual(members.isEmpty, model.isEmpty)
        }
        XCTAssertEqual(Set(members.members.map(\.id)), Set(model.keys))
        for member in members.members {
            XCTAssertTrue(member.sink === model[member.id], "the latest sink of \(member.id)")
            XCTAssertEqual(member.address, Prefetch.address(of: member.sink))
            XCTAssertTrue(members.contains(member.id))
        }
        XCTAssertFalse(members.contains(ConnectionID(1000)))
    }

    func testRemovingTheLastAndAMissingMember() {
        var members = RoomMembers()
        members.insert(RecordingSink(1))
        members.insert(RecordingSink(2))
        members.remove(ConnectionID(2))
        members.remove(ConnectionID(7))
        XCTAssertEqual(members.members.map(\.id), [ConnectionID(1)])
        members.remove(ConnectionID(1))
        XCTAssertTrue(members.isEmpty)
    }

    /// Every member but the excluded connection and user gets the event once; each is asked
    /// for its transport, then its channel, before its write, never after.
    func testTheWalkPrefetchesAheadInOrderAndReachesEveryMemberOnce() {
        let loop = EmbeddedEventLoop()
        let shard = LoopPartition(index: 0, eventLoop: loop, metrics: RelayMetrics())
        let sinks = (1...40).map { StepSink(UInt64($0)) }
        for sink in sinks {
            shard.add(sink, user: sink.connectionID.raw == 7 ? "mallory" : "user\(sink.connectionID.raw)")
            shard.join(room: "r", sink)
        }
        let n = shard.deliver(room: "r", OutboundMessage(bytes: ByteBuffer(string: "hi")), excludeConnection: ConnectionID(3), excludeUser: "mallory")
        XCTAssertEqual(n, 38)
        for sink in sinks {
            let excluded = sink.connectionID.raw == 3 || sink.connectionID.raw == 7
            XCTAssertEqual(sink.steps.filter { $0 == "enqueue" }.count, excluded ? 0 : 1, "\(sink.connectionID)")
            // Whatever it was asked for came before its write, in the order a write reads it.
            let asked = sink.steps.filter { $0 != "enqueue" }
            XCTAssertTrue(["transport", "channel"].starts(with: asked) || ["channel"] == asked, "\(sink.connectionID): \(sink.steps)")
            if !excluded { XCTAssertEqual(sink.steps.last, "enqueue") }
        }
        // All but the first two in walk order were asked for both.
        XCTAssertEqual(sinks.filter { $0.steps.starts(with: ["transport", "channel"]) }.count, 38)
    }

    /// A member that leaves while the walk runs (a slow consumer closed by its own delivery)
    /// does not make the walk skip or repeat anyone.
    func testAMemberLeavingDuringTheWalkSkipsNobody() {
        let loop = EmbeddedEventLoop()
        let shard = LoopPartition(index: 0, eventLoop: loop, metrics: RelayMetrics())
        let sinks = (1...20).map { StepSink(UInt64($0)) }
        for sink in sinks {
            shard.add(sink, user: "user\(sink.connectionID.raw)")
            shard.join(room: "r", sink)
        }
        sinks[4].onEnqueue = { shard.leave(room: "r", ConnectionID(5)) }
        XCTAssertEqual(shard.deliver(room: "r", OutboundMessage(bytes: ByteBuffer(string: "1")), excludeConnection: nil, excludeUser: nil), 20)
        XCTAssertEqual(sinks.map { $0.steps.filter { $0 == "enqueue" }.count }, Array(repeating: 1, count: 20))
        XCTAssertEqual(shard.deliver(room: "r", OutboundMessage(bytes: ByteBuffer(string: "2")), excludeConnection: nil, excludeUser: nil), 19)
        XCTAssertEqual(sinks[4].steps.filter { $0 == "enqueue" }.count, 1, "gone from the room")
    }
}

/// Records what the fan-out asks of it, in order.
private final class StepSink: ConnectionSink {
    let connectionID: ConnectionID
    var steps: [String] = []
    var onEnqueue: (() -> Void)?
    init(_ id: UInt64) { connectionID = ConnectionID(id) }
    func enqueue(_ message: OutboundMessage) {
        steps.append("enqueue")
        onEnqueue?()
    }
    func prefetchTransport() { steps.append("transport") }
    func prefetchChannel() { steps.append("channel") }
    func flushOutbound() {}
    func close(code: UInt16, reason: String) {}
    var isClosing: Bool { false }
    func mayAccess(room: String) -> Bool { true }
}
