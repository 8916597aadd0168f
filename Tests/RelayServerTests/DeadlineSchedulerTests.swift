import NIOConcurrencyHelpers
import NIOCore
import NIOEmbedded
import XCTest

@testable import RelayServer
@testable import RelayBackends

/// The scheduler behind the typing, live-location and coalescing timers: one task at the
/// earliest deadline asked for, whatever the order of the asks; a later ask returns without
/// taking the lock, and is never lost after the task fired or was cancelled.
final class DeadlineSchedulerTests: XCTestCase {
    let loop = EmbeddedEventLoop()
    let clock = ManualClock()
    let fired = NIOLockedValueBox<[Int64]>([])
    let next = NIOLockedValueBox<Int64?>(nil)

    func makeScheduler() -> DeadlineScheduler {
        let scheduler = DeadlineScheduler(eventLoop: loop, now: clock.relayClock.monotonicMs)
        let (fired, next, clock) = (self.fired, self.next, self.clock)
        scheduler.setAction {
            let now = clock.relayClock.monotonicMs()
            fired.withLockedValue { $0.append(now) }
            return next.withLockedValue { n in defer { n = nil }; return n }
        }
        return scheduler
    }

    func advance(_ ms: Int64) {
        clock.advance(ms: ms)
        loop.advanceTime(by: .milliseconds(ms))
    }

    var start: Int64 { clock.relayClock.monotonicMs() }

    func testFiresOnceAtTheEarliestDeadlineWhateverTheOrder() {
        let s = makeScheduler()
        let t0 = start
        s.schedule(at: t0 + 200)
        s.schedule(at: t0 + 100)  // earlier: replaces
        s.schedule(at: t0 + 150)  // later than the one set: nothing to do
        advance(99)
        XCTAssertEqual(fired.withLockedValue { $0 }, [])
        advance(1)
        XCTAssertEqual(fired.withLockedValue { $0 }, [t0 + 100])
        advance(200)
        XCTAssertEqual(fired.withLockedValue { $0 }.count, 1, "the replaced task never fires")
    }

    func testAskingAgainAfterItFiredSchedulesAgain() {
        let s = makeScheduler()
        let t0 = start
        s.schedule(at: t0 + 10)
        advance(10)
        // The deadline set before has passed: a later ask must not be taken as covered by it.
        s.schedule(at: t0 + 50)
        advance(40)
        XCTAssertEqual(fired.withLockedValue { $0 }, [t0 + 10, t0 + 50])
    }

    func testTheActionsNextDeadlineIsScheduled() {
        let s = makeScheduler()
        let t0 = start
        next.withLockedValue { $0 = t0 + 30 }
        s.schedule(at: t0 + 10)
        advance(10)
        // Asked for later than the action's next deadline: covered.
        s.schedule(at: t0 + 40)
        advance(20)
        XCTAssertEqual(fired.withLockedValue { $0 }, [t0 + 10, t0 + 30])
        advance(10)
        XCTAssertEqual(fired.withLockedValue { $0 }, [t0 + 10, t0 + 30], "t0 + 40 was covered by t0 + 30")
    }

    func testAfterCancelAnAskSchedulesAgain() {
        let s = makeScheduler()
        let t0 = start
        s.schedule(at: t0 + 10)
        s.cancel()
        advance(10)
        XCTAssertEqual(fired.withLockedValue { $0 }, [])
        s.schedule(at: t0 + 20)
        advance(10)
        XCTAssertEqual(fired.withLockedValue { $0 }, [t0 + 20])
    }
}
