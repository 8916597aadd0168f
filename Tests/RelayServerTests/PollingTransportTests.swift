import NIOConcurrencyHelpers
import NIOCore
import NIOEmbedded
import NIOHTTP1
import RelayBackends
import RelayCore
import XCTest

@testable import RelayServer
@testable import RelayCluster

/// The long-polling buffer and its held GET, on an embedded loop.
final class PollingTransportTests: XCTestCase {
    let loop = EmbeddedEventLoop()

    func message(_ text: String) -> OutboundMessage {
        var buffer = ByteBufferAllocator().buffer(capacity: text.utf8.count)
        buffer.writeString(text)
        return OutboundMessage(bytes: buffer)
    }

    /// The response, once the embedded loop ran (nil while the request is held).
    func response(_ future: EventLoopFuture<HTTPResponse>) -> HTTPResponse? {
        let box = NIOLockedValueBox<HTTPResponse?>(nil)
        future.whenSuccess { r in box.withLockedValue { $0 = r } }
        loop.run()
        return box.withLockedValue { $0 }
    }

    func body(_ future: EventLoopFuture<HTTPResponse>) throws -> String? {
        response(future).map { String(decoding: $0.body, as: UTF8.self) }
    }

    func testAHeldPollIsAnsweredOnFlushWithPacketsJoinedByRecordSeparators() throws {
        let t = PollingTransport(eventLoop: loop, softLimitBytes: 1 << 20, hardLimitBytes: 1 << 20, maxMessages: 4096, holdMs: 45_000)
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
        let t = PollingTransport(eventLoop: loop, softLimitBytes: 1 << 20, hardLimitBytes: 1 << 20, maxMessages: 4096, holdMs: 45_000)
        t.send(message("40{\"sid\":\"x\"}"))
        let get = loop.makePromise(of: HTTPResponse.self)
        t.poll(get)
        XCTAssertEqual(try body(get.futureResult), "40{\"sid\":\"x\"}")
    }

    func testTwoPollsAtOnceAreAProtocolError() throws {
        let t = PollingTransport(eventLoop: loop, softLimitBytes: 1 << 20, hardLimitBytes: 1 << 20, maxMessages: 4096, holdMs: 45_000)
        var violation: UInt16?
        t.observers.onViolation = { code, _ in violation = code }
        let first = loop.makePromise(of: HTTPResponse.self)
        let second = loop.makePromise(of: HTTPResponse.self)
        t.poll(first)
        t.poll(second)
        XCTAssertEqual(response(second.futureResult)?.status, .badRequest)
        XCTAssertEqual(violation, CloseCode.protocolError)
        // The owner closes the session: the held poll gets the close packet.
        t.close(code: CloseCode.protocolError, reason: "concurrent polls")
        XCTAssertEqual(try body(first.futureResult), "1")
    }

    func testTheBufferIsBounded() {
        let t = PollingTransport(eventLoop: loop, softLimitBytes: 100, hardLimitBytes: 100, maxMessages: 4096, holdMs: 45_000)
        var violation: UInt16?
        t.observers.onViolation = { code, _ in violation = code }
        for _ in 0..<5 { t.send(message(String(repeating: "x", count: 30))) }
        XCTAssertEqual(violation, CloseCode.slowConsumer)
    }

    func testCloseAnswersTheHeldPollWithTheClosePacket() throws {
        let t = PollingTransport(eventLoop: loop, softLimitBytes: 1 << 20, hardLimitBytes: 1 << 20, maxMessages: 4096, holdMs: 45_000)
        var closed = false
        t.observers.onClosed = { closed = true }
        let get = loop.makePromise(of: HTTPResponse.self)
        t.poll(get)
        t.send(message("44{}"))
        t.close(code: CloseCode.authenticationFailed, reason: "x")
        XCTAssertEqual(try body(get.futureResult), "44{}\u{1e}1")
        XCTAssertTrue(closed)
        // The session is gone: later polls learn it.
        let late = loop.makePromise(of: HTTPResponse.self)
        t.poll(late)
        XCTAssertEqual(response(late.futureResult)?.status, .badRequest)
    }

    func testCloseWithoutAHeldPollIsOwedToTheNextOne() throws {
        let t = PollingTransport(eventLoop: loop, softLimitBytes: 1 << 20, hardLimitBytes: 1 << 20, maxMessages: 4096, holdMs: 45_000)
        t.close(code: CloseCode.goingAway, reason: "bye")
        let get = loop.makePromise(of: HTTPResponse.self)
        t.poll(get)
        XCTAssertEqual(try body(get.futureResult), "1")
    }

    func testUpgradeReleasesPollsWithNoopsAndHandsOverWhatIsUnsent() throws {
        let t = PollingTransport(eventLoop: loop, softLimitBytes: 1 << 20, hardLimitBytes: 1 << 20, maxMessages: 4096, holdMs: 45_000)
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
        let t = PollingTransport(eventLoop: loop, softLimitBytes: 1 << 20, hardLimitBytes: 1 << 20, maxMessages: 4096, holdMs: 1000)
        let get = loop.makePromise(of: HTTPResponse.self)
        t.poll(get)
        loop.advanceTime(by: .milliseconds(999))
        XCTAssertNil(try body(get.futureResult))
        loop.advanceTime(by: .milliseconds(1))
        XCTAssertEqual(try body(get.futureResult), "6")
    }
}

/// The cluster envelope carries a binary packet's attachments.
final class ClusterEnvelopeTests: XCTestCase {
    func testAttachmentsRoundTripAndBadLengthsAreDropped() throws {
        let allocator = ByteBufferAllocator()
        var header = allocator.buffer(capacity: 8)
        header.writeString("451-[\"x:y\",{}]")
        var a = allocator.buffer(capacity: 3)
        a.writeBytes([0, 10, 255])
        let envelope = ClusterEnvelope(origin: "n1", label: "custom", durable: false, payload: header, attachments: [a, allocator.buffer(capacity: 0)])
        let decoded = try XCTUnwrap(ClusterEnvelope.decode(envelope.encode()))
        XCTAssertEqual(String(buffer: decoded.payload), "451-[\"x:y\",{}]")
        XCTAssertEqual(decoded.attachments.map { Array($0.readableBytesView) }, [[0, 10, 255], []])
        var forged = allocator.buffer(capacity: 64)
        forged.writeString("{\"o\":\"n1\",\"p\":3,\"a\":[999999]}\nabc")
        XCTAssertNil(ClusterEnvelope.decode(forged))
        var negative = allocator.buffer(capacity: 64)
        negative.writeString("{\"o\":\"n1\",\"p\":-1,\"a\":[1]}\nabc")
        XCTAssertNil(ClusterEnvelope.decode(negative))
    }

    func testTheRoomScopesOfAUserStreamEventRoundTrip() throws {
        var payload = ByteBufferAllocator().buffer(capacity: 8)
        payload.writeString("42[\"message:read\",{}]")
        let publication = Publication(packet: payload, label: "message:read", durable: true, allowedIn: "conversation:{a}")
        let envelope = ClusterEnvelope(origin: "n1", publication: publication, routing: Routing(skipMembersOf: "conversation:b"))
        let decoded = try XCTUnwrap(ClusterEnvelope.decode(envelope.encode()))
        XCTAssertEqual(decoded.allowedIn, "conversation:{a}")
        XCTAssertEqual(decoded.skipMembersOf, "conversation:b")
        XCTAssertEqual(decoded.publication.allowedIn, "conversation:{a}")
    }
}
