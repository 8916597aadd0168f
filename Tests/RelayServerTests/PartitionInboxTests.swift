import NIOConcurrencyHelpers
import NIOCore
import NIOEmbedded
import NIOPosix
import RelayCore
import XCTest

@testable import RelayServer

/// Deliveries posted to a loop partition run in the order they were posted, in batches, from any
/// thread; one posted while a batch runs goes to the next batch.
final class PartitionInboxTests: XCTestCase {
    func message(_ text: String) -> OutboundMessage {
        OutboundMessage(bytes: ByteBuffer(string: text))
    }

    func testPostedDeliveriesWaitForTheLoopAndRunInOrder() {
        let loop = EmbeddedEventLoop()
        let shard = LoopPartition(index: 0, eventLoop: loop, metrics: RelayMetrics())
        let alice = RecordingSink(1)
        shard.add(alice, user: "alice")
        shard.join(room: "r", alice)
        shard.post(.room("r", message("1"), excludeConnection: nil, excludeUser: nil))
        shard.post(.user("alice", message("2")))
        shard.post(.userOutsideRoom("alice", message("3"), room: "other", excludeConnection: nil))
        XCTAssertEqual(shard.pendingDeliveries, 3)
        XCTAssertEqual(alice.received, [], "posting never delivers inline")
        loop.run()
        XCTAssertEqual(shard.pendingDeliveries, 0)
        XCTAssertEqual(alice.received, ["1", "2", "3"])
        XCTAssertGreaterThan(alice.flushes, 0, "what the batch wrote is flushed")
    }

    func testADeliveryPostedWhileABatchRunsGoesToTheNextBatch() {
        let loop = EmbeddedEventLoop()
        let shard = LoopPartition(index: 0, eventLoop: loop, metrics: RelayMetrics())
        let alice = RecordingSink(1)
        let bob = PostingSink(2, shard: shard)
        shard.add(alice, user: "alice")
        shard.add(bob, user: "bob")
        shard.join(room: "r", bob)
        shard.join(room: "r", alice)
        shard.post(.user("bob", message("first")))
        shard.post(.user("alice", message("second")))
        loop.run()
        // Bob's delivery posted "from bob" to alice while the batch ran: after "second".
        XCTAssertEqual(alice.received, ["second", "from bob"])
        XCTAssertEqual(shard.pendingDeliveries, 0)
    }

    /// A stamped event published on the loop keeps its local delivery inline only when nothing
    /// can be ahead of it there: the inbox is empty and no batch runs. It runs when the publish
    /// ends (after the broker's lock), before any task posted meanwhile.
    func testAStampedDeliveryRunsInlineOnlyWhenNothingIsAheadOfIt() {
        let loop = EmbeddedEventLoop()
        let shard = LoopPartition(index: 0, eventLoop: loop, metrics: RelayMetrics())
        let alice = RecordingSink(1)
        shard.add(alice, user: "alice")
        shard.join(room: "r", alice)
        // Not inside a publish: never kept.
        XCTAssertFalse(shard.keepInline(.room("r", message("0"), excludeConnection: nil, excludeUser: nil)))

        let previous = shard.beginInlinePublish()
        XCTAssertTrue(shard.keepInline(.room("r", message("1"), excludeConnection: nil, excludeUser: nil)))
        XCTAssertFalse(shard.keepInline(.room("r", message("x"), excludeConnection: nil, excludeUser: nil)), "one slot per publish")
        XCTAssertEqual(alice.received, [], "kept until the publish ends")
        shard.endInlinePublish(previous)
        XCTAssertEqual(alice.received, ["1"], "ran when the publish ended, without a task")

        // An earlier delivery waits in the inbox: a later one of the stream must not overtake it.
        shard.post(.room("r", message("2"), excludeConnection: nil, excludeUser: nil))
        let again = shard.beginInlinePublish()
        XCTAssertFalse(shard.keepInline(.room("r", message("3"), excludeConnection: nil, excludeUser: nil)))
        shard.post(.room("r", message("3"), excludeConnection: nil, excludeUser: nil))
        shard.endInlinePublish(again)
        loop.run()
        XCTAssertEqual(alice.received, ["1", "2", "3"])
    }

    /// From a thread that is not the partition's loop nothing is kept inline.
    func testAStampedDeliveryFromAnotherThreadIsPosted() throws {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        defer { try? group.syncShutdownGracefully() }
        let shard = LoopPartition(index: 0, eventLoop: group.next(), metrics: RelayMetrics())
        let kept = try shard.eventLoop.submit { shard.beginInlinePublish() }.wait()
        XCTAssertFalse(kept)
        XCTAssertFalse(shard.keepInline(.user("alice", message("1"))), "the caller is not on the partition's loop")
        try shard.eventLoop.submit { shard.endInlinePublish(kept) }.wait()
    }

    /// A batch flushes the sockets it wrote to when it ends, in the same task: a task queued on
    /// the loop while the batch ran finds them flushed already (no second task walks them).
    func testABatchFlushesItsSocketsBeforeTheLoopRunsAnythingElse() {
        let loop = EmbeddedEventLoop()
        let shard = LoopPartition(index: 0, eventLoop: loop, metrics: RelayMetrics())
        let alice = RecordingSink(1)
        var flushesSeenByTheTask: [Int] = []
        let bob = TaskQueuingSink(2, loop: loop) { flushesSeenByTheTask.append(alice.flushes) }
        shard.add(alice, user: "alice")
        shard.add(bob, user: "bob")
        shard.post(.user("bob", message("1")))
        shard.post(.user("alice", message("2")))
        shard.post(.user("alice", message("3")))
        loop.run()
        XCTAssertEqual(alice.received, ["2", "3"])
        XCTAssertGreaterThan(alice.flushes, 0)
        XCTAssertEqual(flushesSeenByTheTask, [alice.flushes], "every flush happened before the next task ran")
        XCTAssertEqual(bob.flushes, 1)
    }

    /// Sockets 1 and 2 on one shard, in rooms `first` and `second`, logging their writes and
    /// flushes to one log.
    fileprivate func twoLoggingSockets(inRooms first: String, _ second: String) -> (EmbeddedEventLoop, LoopPartition, EventLog) {
        let loop = EmbeddedEventLoop()
        let shard = LoopPartition(index: 0, eventLoop: loop, metrics: RelayMetrics())
        let log = EventLog()
        for (id, room) in [(UInt64(1), first), (2, second)] {
            let sink = LoggingSink(id, log)
            shard.add(sink, user: "user\(id)")
            shard.join(room: room, sink)
        }
        return (loop, shard, log)
    }

    /// A batch of events to different rooms writes each socket once: each socket is flushed
    /// right after its write (hot), not in a second walk when the batch ends.
    func testABatchForDifferentRoomsFlushesEachSocketRightAfterItsWrite() {
        let (loop, shard, log) = twoLoggingSockets(inRooms: "a", "b")
        shard.post(.room("a", message("1"), excludeConnection: nil, excludeUser: nil))
        shard.post(.room("b", message("2"), excludeConnection: nil, excludeUser: nil))
        loop.run()
        XCTAssertEqual(log.entries, ["write 1 to 1", "flush 1", "write 2 to 2", "flush 2"])
    }

    /// Two events for one room in a batch (a burst): both are written first, then each socket
    /// is flushed once, so its two events leave in one `writev`.
    func testABatchWithTwoEventsForARoomJoinsEachSocketsWritesIntoOneFlush() {
        let (loop, shard, log) = twoLoggingSockets(inRooms: "r", "r")
        shard.post(.room("r", message("1"), excludeConnection: nil, excludeUser: nil))
        shard.post(.room("r", message("2"), excludeConnection: nil, excludeUser: nil))
        loop.run()
        XCTAssertEqual(Array(log.entries.prefix(4)).sorted(), ["write 1 to 1", "write 1 to 2", "write 2 to 1", "write 2 to 2"])
        XCTAssertEqual(log.entries.filter { $0.hasPrefix("flush") }.count, 4, "each socket was in the flush list twice")
        XCTAssertTrue(log.entries.suffix(4).allSatisfy { $0.hasPrefix("flush") }, "no flush before the batch's writes were all done")
    }

    func testWhichBatchesWriteEachSocketOnce() {
        func room(_ r: String) -> PartitionDelivery { .room(r, message("x"), excludeConnection: nil, excludeUser: nil) }
        XCTAssertTrue(LoopPartition.writesEachSocketOnce([room("a")]))
        XCTAssertTrue(LoopPartition.writesEachSocketOnce([.user("u", message("x"))]), "one delivery of any kind")
        XCTAssertTrue(LoopPartition.writesEachSocketOnce([room("a"), room("b"), room("c")]))
        XCTAssertFalse(LoopPartition.writesEachSocketOnce([room("a"), room("b"), room("a")]))
        XCTAssertFalse(LoopPartition.writesEachSocketOnce([room("a"), .user("u", message("x"))]), "a user's sockets may be in the room")
        let many = (0...LoopPartition.maxFlushAtOnceBatch).map { room("r\($0)") }
        XCTAssertFalse(LoopPartition.writesEachSocketOnce(many), "a batch this large means the loop fell behind: join the flushes")
        XCTAssertTrue(LoopPartition.writesEachSocketOnce(Array(many.dropLast())))
    }

    /// Four threads post under one lock (as the memory broker posts a stream's events under the
    /// stream's lock): the socket gets them in exactly that order.
    func testPostsFromManyThreadsKeepTheOrderTheyWerePostedIn() throws {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        defer { try? group.syncShutdownGracefully() }
        let loop = group.next()
        let shard = LoopPartition(index: 0, eventLoop: loop, metrics: RelayMetrics())
        let total = 4 * 2_000
        let done = loop.makePromise(of: [Int].self)
        let sink = CountingSink(3, expected: total, done: done)
        try loop.submit {
            shard.add(sink, user: "u")
            shard.join(room: "r", sink)
        }.wait()
        let streamLock = NIOLock()
        let next = NIOLockedValueBox(0)
        DispatchQueue.concurrentPerform(iterations: 4) { _ in
            for _ in 0..<2_000 {
                streamLock.withLock {
                    let n = next.withLockedValue { n in
                        defer { n += 1 }
                        return n
                    }
                    shard.post(.room("r", OutboundMessage(bytes: ByteBuffer(string: String(n))), excludeConnection: nil, excludeUser: nil))
                }
            }
        }
        let received = try done.futureResult.wait()
        XCTAssertEqual(received, Array(0..<total))
    }
}

/// A sink that queues a task on the loop when it gets a message.
private final class TaskQueuingSink: ConnectionSink {
    let connectionID: ConnectionID
    let loop: EmbeddedEventLoop
    let task: () -> Void
    var flushes = 0
    init(_ id: UInt64, loop: EmbeddedEventLoop, task: @escaping () -> Void) {
        connectionID = ConnectionID(id)
        self.loop = loop
        self.task = task
    }
    func enqueue(_ message: OutboundMessage) { loop.assumeIsolated().execute(task) }
    func flushOutbound() { flushes += 1 }
    func close(code: UInt16, reason: String) {}
    var isClosing: Bool { false }
    func mayAccess(room: String) -> Bool { true }
}

/// A sink that posts a delivery to alice when it gets a message (a delivery that causes another).
private final class PostingSink: ConnectionSink {
    let connectionID: ConnectionID
    let shard: LoopPartition
    init(_ id: UInt64, shard: LoopPartition) {
        connectionID = ConnectionID(id)
        self.shard = shard
    }
    func enqueue(_ message: OutboundMessage) { shard.post(.user("alice", OutboundMessage(bytes: ByteBuffer(string: "from bob")))) }
    func flushOutbound() {}
    func close(code: UInt16, reason: String) {}
    var isClosing: Bool { false }
    func mayAccess(room: String) -> Bool { true }
}

/// Records the numbers it gets and completes `done` at the expected count. Confined to the
/// shard's loop (every `ConnectionSink` method runs there), which guards `received`.
private final class CountingSink: ConnectionSink, @unchecked Sendable {
    let connectionID: ConnectionID
    let expected: Int
    let done: EventLoopPromise<[Int]>
    var received: [Int] = []
    init(_ id: UInt64, expected: Int, done: EventLoopPromise<[Int]>) {
        connectionID = ConnectionID(id)
        self.expected = expected
        self.done = done
    }
    func enqueue(_ message: OutboundMessage) {
        received.append(Int(String(buffer: message.bytes)) ?? -1)
        if received.count == expected { done.succeed(received) }
    }
    func flushOutbound() {}
    func close(code: UInt16, reason: String) {}
    var isClosing: Bool { false }
    func mayAccess(room: String) -> Bool { true }
}

/// What the sinks of a test did, in order (loop-confined).
private final class EventLog {
    var entries: [String] = []
}

/// Logs each write and flush to a shared log, to check their order across sockets.
private final class LoggingSink: ConnectionSink {
    let connectionID: ConnectionID
    let log: EventLog
    init(_ id: UInt64, _ log: EventLog) {
        connectionID = ConnectionID(id)
        self.log = log
    }
    func enqueue(_ message: OutboundMessage) { log.entries.append("write \(String(buffer: message.bytes)) to \(connectionID.raw)") }
    func flushOutbound() { log.entries.append("flush \(connectionID.raw)") }
    func close(code: UInt16, reason: String) {}
    var isClosing: Bool { false }
    func mayAccess(room: String) -> Bool { true }
}
