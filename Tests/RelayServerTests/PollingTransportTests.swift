import NIOCore
import NIOEmbedded
import RelayCore
import XCTest

@testable import RelayServer

/// The long-polling buffer and its held GET, on an embedded loop.
final class PollingTransportTests: XCTestCase {
    let loop = EmbeddedEventLoop()

    func message(_ text: String) -> OutboundMessage {
        var buffer = ByteBufferAllocator().buffer(capacity: text.utf8.count)
        buffer.writeString(text)
        return OutboundMessage(bytes: buffer)
    }

    func body(_ future: EventLoopFuture<HTTPResponse>) throws -> String? {
        var out: String?
        future.whenSuccess { out = String(decoding: $0.body, as: UTF8.self) }
        loop.run()
        return out
    }

    func testAHeldPollIsAnsweredOnFlushWithPacketsJoinedByRecordSeparators() throws {
        let t = PollingTransport(eventLoop: loop, hardLimitBytes: 1 << 20, holdMs: 45_000)
        let get = loop.makePromise(of: HTTPResponse.self)
        t.poll(get)
        XCTAssertNil(try body(get.futureResult), "nothing to take: held")
        t.send(message("42[\"a\",{}]"))
        t.send(message("2"))
        XCTAssertNil(try body(get.futureResult), "sent but not flushed")
        t.flush()
        XCTAssertEqual(try body(get.futureResult), "42[\"a\",{}]\u{1e}2")
    }

    func testAPollTakesWhatIsBufferedAtOnce() throws {
        let t = PollingTransport(eventLoop: loop, hardLimitBytes: 1 << 20, holdMs: 45_000)
        t.send(message("40{\"sid\":\"x\"}"))
        let get = loop.makePromise(of: HTTPResponse.self)
        t.poll(get)
        XCTAssertEqual(try body(get.futureResult), "40{\"sid\":\"x\"}")
    }

    func testTwoPollsAtOnceAreAProtocolError() throws {
        let t = PollingTransport(eventLoop: loop, hardLimitBytes: 1 << 20, holdMs: 45_000)
        var violation: UInt16?
        t.onViolation = { code, _ in violation = code }
        let first = loop.makePromise(of: HTTPResponse.self)
        let second = loop.makePromise(of: HTTPResponse.self)
        t.poll(first)
        var status: HTTPResponseStatus?
        second.futureResult.whenSuccess { status = $0.status }
        t.poll(second)
        loop.run()
        XCTAssertEqual(status, .badRequest)
        XCTAssertEqual(violation, CloseCode.protocolError)
    }

    func testTheBufferIsBounded() {
        let t = PollingTransport(eventLoop: loop, hardLimitBytes: 100, holdMs: 45_000)
        var violation: UInt16?
        t.onViolation = { code, _ in violation = code }
        for _ in 0..<5 { t.send(message(String(repeating: "x", count: 30))) }
        XCTAssertEqual(violation, CloseCode.slowConsumer)
    }

    func testCloseAnswersTheHeldPollWithTheClosePacket() throws {
        let t = PollingTransport(eventLoop: loop, hardLimitBytes: 1 << 20, holdMs: 45_000)
        var closed = false
        t.onClosed = { closed = true }
        let get = loop.makePromise(of: HTTPResponse.self)
        t.poll(get)
        t.send(message("44{}"))
        t.close(code: CloseCode.authenticationFailed, reason: "x")
        XCTAssertEqual(try body(get.futureResult), "44{}\u{1e}1")
        XCTAssertTrue(closed)
        // The session is gone: later polls learn it.
        let late = loop.makePromise(of: HTTPResponse.self)
        var status: HTTPResponseStatus?
        late.futureResult.whenSuccess { status = $0.status }
        t.poll(late)
        loop.run()
        XCTAssertEqual(status, .badRequest)
    }

    func testCloseWithoutAHeldPollIsOwedToTheNextOne() throws {
        let t = PollingTransport(eventLoop: loop, hardLimitBytes: 1 << 20, holdMs: 45_000)
        t.close(code: CloseCode.goingAway, reason: "bye")
        let get = loop.makePromise(of: HTTPResponse.self)
        t.poll(get)
        XCTAssertEqual(try body(get.futureResult), "1")
    }

    func testUpgradeReleasesPollsWithNoopsAndHandsOverWhatIsUnsent() throws {
        let t = PollingTransport(eventLoop: loop, hardLimitBytes: 1 << 20, holdMs: 45_000)
        let held = loop.makePromise(of: HTTPResponse.self)
        t.poll(held)
        t.releasePendingPoll()
        XCTAssertEqual(try body(held.futureResult), "6")
        let next = loop.makePromise(of: HTTPResponse.self)
        t.send(message("42[\"late\",{}]"))
        t.poll(next)
        XCTAssertEqual(try body(next.futureResult), "6", "while upgrading, polls only get noops")
        XCTAssertEqual(t.takeUnsent().map { String(buffer: $0.bytes) }, ["42[\"late\",{}]"], "the WebSocket sends it")
        t.closeForUpgrade()
        XCTAssertTrue(t.closed)
    }

    func testAHeldPollIsReleasedAtTheLatestAfterItsHoldTime() throws {
        let t = PollingTransport(eventLoop: loop, hardLimitBytes: 1 << 20, holdMs: 1000)
        let get = loop.makePromise(of: HTTPResponse.self)
        t.poll(get)
        loop.advanceTime(by: .milliseconds(999))
        XCTAssertNil(try body(get.futureResult))
        loop.advanceTime(by: .milliseconds(1))
        XCTAssertEqual(try body(get.futureResult), "6")
    }
}
