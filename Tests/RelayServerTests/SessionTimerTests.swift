import NIOCore
import NIOPosix
import XCTest

@testable import RelayServer

/// `SessionTimer` on a real NIO loop: a callback NIO had already taken out of its queue when it
/// was replaced must not make the timer forget the one set after it (that one then held its
/// session for up to a heartbeat after the session ended: e2e `test_abandoned_sessions_leak_nothing`
/// saw one such session in 20 000).
final class SessionTimerTests: XCTestCase {
    /// Touched only on the test's one loop (every access is inside `submit` or a callback).
    private final class Owner: SessionTimerOwner, @unchecked Sendable {
        var timer = SessionTimer()
        var current = 0
        var stale = 0

        func sessionTimerFired(generation: UInt32) {
            if timer.fired(generation) {
                current += 1
            } else {
                stale += 1
            }
        }
    }

    private var group: MultiThreadedEventLoopGroup!

    override func setUp() {
        group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
    }

    override func tearDown() {
        try? group.syncShutdownGracefully()
    }

    func testACallbackReplacedAfterNIOTookItOutOfItsQueueChangesNothing() throws {
        let loop = group.next()
        var owner: Owner? = Owner()
        weak let weakOwner = owner
        let batchRan = loop.makePromise(of: Void.self)
        try loop.submit { [owner] in
            guard let owner else { return }
            // Three tasks due at the next tick, in this order: NIO takes them all out of its
            // queue, then the first replaces the timer whose callback is already out (its cancel
            // finds nothing); the last says the batch ran.
            let isolated = loop.assumeIsolated()
            isolated.scheduleTask(in: .zero) {
                owner.timer.set(for: 60_000, now: 0, on: loop, owner: owner)
            }
            owner.timer.set(for: 0, now: 0, on: loop, owner: owner)
            isolated.scheduleTask(in: .zero) { batchRan.succeed(()) }
        }.wait()
        try batchRan.futureResult.wait()
        let counts = try loop.submit { [owner] in (owner?.current, owner?.stale) }.wait()
        XCTAssertEqual(counts.0, 0, "the replaced callback was taken for the current one")
        XCTAssertEqual(counts.1, 1)
        // Ending the session cancels the timer set last: nothing in the loop holds the owner.
        try loop.submit { [owner] in
            owner?.timer.cancel()
        }.wait()
        owner = nil
        try loop.submit {}.wait()
        XCTAssertNil(weakOwner, "a timer the session no longer knew of still held it")
    }

    func testTheCurrentCallbackFiresOnceAndACancelledOneNever() throws {
        let loop = group.next()
        let owner = Owner()
        let fired = loop.makePromise(of: Void.self)
        try loop.submit {
            owner.timer.set(for: 60_000, now: 0, on: loop, owner: owner)
            owner.timer.cancel()
            owner.timer.set(for: 1, now: 0, on: loop, owner: owner)
            // The same deadline again keeps the timer already set (no second callback).
            owner.timer.set(for: 1, now: 0, on: loop, owner: owner)
            loop.assumeIsolated().scheduleTask(in: .milliseconds(50)) { fired.succeed(()) }
        }.wait()
        try fired.futureResult.wait()
        let counts = try loop.submit { (owner.current, owner.stale) }.wait()
        XCTAssertEqual(counts.0, 1)
        XCTAssertEqual(counts.1, 0)
    }
}
