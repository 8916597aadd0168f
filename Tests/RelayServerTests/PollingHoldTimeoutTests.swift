import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import XCTest

@testable import RelayServer

/// `PollingTransport`'s hold timeout on a real NIO loop: a timeout NIO had already taken out of
/// its queue when its `GET` was answered must not answer the next `GET` (it used to, with a
/// noop, long before the next `GET`'s own timeout).
final class PollingHoldTimeoutTests: XCTestCase {
    private var group: MultiThreadedEventLoopGroup!

    override func setUp() {
        group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
    }

    override func tearDown() {
        try? group.syncShutdownGracefully()
    }

    /// Holds the transport for the test's loop. (`@unchecked Sendable`: made and used only on
    /// the test's one loop, inside `submit` or a task.)
    private final class Fixture: @unchecked Sendable {
        let transport: PollingTransport
        init(_ transport: PollingTransport) { self.transport = transport }
    }

    private static func message(_ text: String) -> OutboundMessage {
        var buffer = ByteBufferAllocator().buffer(capacity: text.utf8.count)
        buffer.writeString(text)
        return OutboundMessage(bytes: buffer)
    }

    func testATimeoutAlreadyDueWhenItsGETWasAnsweredLeavesTheNextGETHeld() throws {
        let loop = group.next()
        // holdMs 0: the first GET's timeout is due at the next tick. The second GET's one is
        // set during that tick, so NIO runs it only in a later one.
        let fixture = try loop.submit {
            Fixture(PollingTransport(eventLoop: loop, softLimitBytes: 1 << 20, hardLimitBytes: 1 << 20, maxMessages: 64, holdMs: 0))
        }.wait()
        let first = loop.makePromise(of: HTTPResponse.self)
        let second = loop.makePromise(of: HTTPResponse.self)
        let batchRan = loop.makePromise(of: Bool.self)
        let secondAnswered = NIOLockedValueBox(false)
        second.futureResult.whenComplete { _ in secondAnswered.withLockedValue { $0 = true } }
        try loop.submit {
            // Three tasks due at the next tick, in this order: NIO takes them all out of its
            // queue; the first answers the held GET (its timeout's cancel finds nothing) and
            // holds the next one; the timeout runs; the last reads whether the second GET was
            // answered within the batch.
            let isolated = loop.assumeIsolated()
            isolated.scheduleTask(in: .zero) {
                fixture.transport.send(Self.message("42[\"a\",{}]"))
                fixture.transport.flush()
                fixture.transport.poll(second)
            }
            fixture.transport.poll(first)
            isolated.scheduleTask(in: .zero) {
                batchRan.succeed(secondAnswered.withLockedValue { $0 })
            }
        }.wait()
        let firstBody = try first.futureResult.wait().body
        XCTAssertEqual(String(decoding: firstBody, as: UTF8.self), "42[\"a\",{}]")
        XCTAssertFalse(try batchRan.futureResult.wait(), "the first GET's timeout answered the second GET")
        // The second GET's own timeout still answers it (noop).
        let secondBody = try second.futureResult.wait().body
        XCTAssertEqual(String(decoding: secondBody, as: UTF8.self), "6")
    }
}
