import NIOCore
import NIOPosix
import XCTest

@testable import RelayRedis

/// The client's pub/sub bookkeeping without a server: where channels go as slots move, which
/// confirmations count, and what a lost link or an unasked unsubscribe leaves.
final class RedisSubscriptionsTests: XCTestCase {
    private let a = RedisEndpoint.Address(host: "127.0.0.1", port: 7000)
    private let b = RedisEndpoint.Address(host: "127.0.0.1", port: 7001)

    func testChannelsArePlacedOnTheirOwnerAndMovedWhenTheSlotMoves() {
        var subs = RedisSubscriptions()
        XCTAssertEqual(subs.add(["x", "y"]), ["x", "y"])
        XCTAssertEqual(subs.add(["x", "z"]), ["z"], "a channel kept already is not new")
        let first = subs.place(["x", "y", "z"]) { $0 == "z" ? nil : self.a }
        XCTAssertEqual(first.subscribe[a]?.sorted(), ["x", "y"])
        XCTAssertTrue(first.unsubscribe.isEmpty)
        // Placed again where it is: nothing to do.
        XCTAssertTrue(subs.place(["x"]) { _ in self.a }.subscribe.isEmpty)
        // "y"'s slot moved to b: subscribe there, leave a; "z" (no live owner before) goes to b.
        let moved = subs.place(["y", "z"]) { _ in self.b }
        XCTAssertEqual(moved.subscribe[b]?.sorted(), ["y", "z"])
        XCTAssertEqual(moved.unsubscribe[a], ["y"])
    }

    func testOnlyAConfirmationFromTheChannelsMasterCountsAndWakesItsWaiters() throws {
        let loop = MultiThreadedEventLoopGroup.singleton.next()
        var subs = RedisSubscriptions()
        _ = subs.add(["x"])
        _ = subs.place(["x"]) { _ in self.a }
        let promise = loop.makePromise(of: Void.self)
        subs.wait(for: "x", promise)
        XCTAssertTrue(subs.confirm("x", on: b).isEmpty, "b is not where x is subscribed")
        XCTAssertFalse(subs.isConfirmed("x"))
        let waiters = subs.confirm("x", on: a)
        XCTAssertEqual(waiters.count, 1)
        waiters.forEach { $0.succeed(()) }
        XCTAssertNoThrow(try promise.futureResult.wait())
        XCTAssertTrue(subs.isConfirmed("x"))
        // Placed anew (its slot moved): it must be confirmed again.
        _ = subs.place(["x"]) { _ in self.b }
        XCTAssertFalse(subs.isConfirmed("x"))
    }

    func testALostLinkForgetsWhatWasSubscribedThere() {
        var subs = RedisSubscriptions()
        _ = subs.add(["x", "y"])
        _ = subs.place(["x"]) { _ in self.a }
        _ = subs.place(["y"]) { _ in self.b }
        _ = subs.confirm("x", on: a)
        subs.forget(a)
        XCTAssertFalse(subs.isConfirmed("x"))
        XCTAssertEqual(subs.channels, ["x", "y"], "the channels stay wanted")
        // Placed again on the same master: subscribed anew there (it was forgotten).
        XCTAssertEqual(subs.place(["x", "y"]) { _ in self.a }.subscribe[a]?.sorted(), ["x", "y"])
    }

    func testAnUnaskedUnsubscribeAsksWhereAWantedChannelWent() {
        var subs = RedisSubscriptions()
        _ = subs.add(["x"])
        _ = subs.place(["x"]) { _ in self.a }
        XCTAssertFalse(subs.dropped("x", on: b), "not subscribed on b")
        XCTAssertTrue(subs.dropped("x", on: a))
        XCTAssertFalse(subs.dropped("x", on: a), "already dropped")
        // Given up by the client: an unsubscribe it asked for needs nothing more.
        _ = subs.place(["x"]) { _ in self.a }
        XCTAssertEqual(subs.remove(["x"]), [a: ["x"]])
        XCTAssertFalse(subs.dropped("x", on: a))
        XCTAssertTrue(subs.channels.isEmpty)
    }

    func testCommandGroupsAreOneSlotEachOnlyForShardedPubSubInACluster() {
        XCTAssertEqual(RedisSubscriptions.commandGroups(["b", "a"], bySlot: false), [["a", "b"]])
        XCTAssertEqual(RedisSubscriptions.commandGroups([], bySlot: false), [])
        // "{s}1" and "{s}2" share a slot; "other" has its own.
        let groups = RedisSubscriptions.commandGroups(["{s}2", "other", "{s}1"], bySlot: true)
        XCTAssertEqual(groups.count, 2)
        XCTAssertTrue(groups.contains(["{s}1", "{s}2"]))
        XCTAssertTrue(groups.contains(["other"]))
        XCTAssertEqual(Set(groups.map { RedisHashSlot.slot(of: $0[0]) }).count, 2)
    }
}
