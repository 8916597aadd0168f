import XCTest
@testable import RelayCore

final class WebhookSignatureTests: XCTestCase {
    func testSignedBytesAreTimestampDotBody() {
        XCTAssertEqual(String(decoding: WebhookSignature.signedBytes(timestamp: 1_700_000_000, body: Array(#"{"a":1}"#.utf8)), as: UTF8.self), #"1700000000.{"a":1}"#)
    }

    func testHeaderValueAndParse() {
        let value = WebhookSignature.headerValue(timestamp: 42, mac: [0x00, 0xab, 0xff, 0x10])
        XCTAssertEqual(value, "t=42,v1=00abff10")
        XCTAssertEqual(WebhookSignature.parse(value), .init(timestamp: 42, signatures: ["00abff10"]))
        XCTAssertEqual(WebhookSignature.parse("t=7, v1=aa, v2=zz, v1=bb"), .init(timestamp: 7, signatures: ["aa", "bb"]))
        XCTAssertNil(WebhookSignature.parse("v1=aa"))
        XCTAssertNil(WebhookSignature.parse("t=x,v1=aa"))
        XCTAssertNil(WebhookSignature.parse("t=1"))
    }

    func testReplayWindow() {
        XCTAssertTrue(WebhookSignature.isFresh(timestamp: 1000, now: 1300))
        XCTAssertFalse(WebhookSignature.isFresh(timestamp: 1000, now: 1301))
        XCTAssertTrue(WebhookSignature.isFresh(timestamp: 1300, now: 1000))
        XCTAssertFalse(WebhookSignature.isFresh(timestamp: 1301, now: 1000))
        XCTAssertTrue(WebhookSignature.isFresh(timestamp: 1000, now: 1010, toleranceSeconds: 10))
    }

    func testConstantTimeEquals() {
        XCTAssertTrue(WebhookSignature.constantTimeEquals("abcd", "abcd"))
        XCTAssertFalse(WebhookSignature.constantTimeEquals("abcd", "abce"))
        XCTAssertFalse(WebhookSignature.constantTimeEquals("abcd", "abc"))
    }
}

final class WebhookRetryPolicyTests: XCTestCase {
    func testExponentialWithEqualJitter() {
        let p = WebhookRetryPolicy(baseMs: 100, maxMs: 1000, maxAttempts: 5)
        // Attempt n failed: backoff d = min(1000, 100·2^(n−1)), jittered into [d/2, d].
        XCTAssertEqual(p.delayMs(afterAttempt: 1, random: 0), 50)
        XCTAssertEqual(p.delayMs(afterAttempt: 1, random: 0.999_999), 99)
        XCTAssertEqual(p.delayMs(afterAttempt: 2, random: 0), 100)
        XCTAssertEqual(p.delayMs(afterAttempt: 3, random: 0.5), 300)
        XCTAssertEqual(p.delayMs(afterAttempt: 4, random: 0), 400)
        XCTAssertEqual(p.delayMs(afterAttempt: 5, random: 0), 500) // capped at 1000
        XCTAssertEqual(p.delayMs(afterAttempt: 60, random: 1), 1000) // no overflow
        XCTAssertEqual(p.delayMs(afterAttempt: 3, random: .nan), 200)
        for n in 1...30 {
            for r in stride(from: 0.0, to: 1.0, by: 0.1) {
                let d = p.delayMs(afterAttempt: n, random: r)
                XCTAssertGreaterThanOrEqual(d, 50)
                XCTAssertLessThanOrEqual(d, 1000)
            }
        }
    }

    func testAttempts() {
        let p = WebhookRetryPolicy(baseMs: 100, maxMs: 1000, maxAttempts: 3)
        XCTAssertTrue(p.mayRetry(afterAttempt: 1))
        XCTAssertTrue(p.mayRetry(afterAttempt: 2))
        XCTAssertFalse(p.mayRetry(afterAttempt: 3))
        XCTAssertTrue(WebhookRetryPolicy(baseMs: 250, maxMs: 30_000, maxAttempts: 0).mayRetry(afterAttempt: 1_000_000))
    }
}

final class WebhookQueueTests: XCTestCase {
    typealias Q = WebhookQueue<Int>

    private func options(batch: Int = 3, flush: Int64 = 200, capacity: Int = 10, attempts: Int = 3) -> Q.Options {
        Q.Options(batchSize: batch, flushMs: flush, capacity: capacity, capacityBytes: 64 << 20, retry: WebhookRetryPolicy(baseMs: 100, maxMs: 1000, maxAttempts: attempts))
    }

    private func sent(_ action: Q.Action, file: StaticString = #filePath, line: UInt = #line) -> Q.Batch? {
        if case .send(let b) = action { return b }
        XCTFail("expected a send, got \(action)", file: file, line: line)
        return nil
    }

    func testFlushesAfterFlushMs() {
        var q = Q(options: options())
        XCTAssertTrue(q.enqueue(1, now: 1000))
        XCTAssertEqual(q.nextDue(now: 1000), 1200)
        guard case .wait(let until) = q.poll(now: 1100) else { return XCTFail() }
        XCTAssertEqual(until, 1200)
        XCTAssertTrue(q.enqueue(2, now: 1150))
        let b = sent(q.poll(now: 1200))
        XCTAssertEqual(b?.events, [1, 2])
        XCTAssertEqual(b?.attempt, 1)
        XCTAssertEqual(b?.oldestEnqueuedAt, 1000)
        XCTAssertNil(q.nextDue(now: 1200)) // in flight
        XCTAssertEqual(q.finished(success: true, now: 1250, random: 0), .delivered(events: 2, latencyMs: 250))
        XCTAssertTrue(q.isEmpty)
        guard case .idle = q.poll(now: 5000) else { return XCTFail() }
    }

    func testTheQueueIsBoundedInBytesWaitingAndInFlight() {
        var q = Q(options: Q.Options(batchSize: 2, flushMs: 0, capacity: 100, capacityBytes: 1000, retry: WebhookRetryPolicy(baseMs: 250, maxMs: 30_000, maxAttempts: 12)))
        XCTAssertTrue(q.enqueue(1, bytes: 600, now: 0))
        XCTAssertFalse(q.enqueue(2, bytes: 500, now: 0), "1100 bytes would not fit")
        XCTAssertTrue(q.enqueue(3, bytes: 400, now: 0))
        XCTAssertEqual(q.queuedBytes, 1000)
        XCTAssertEqual(sent(q.poll(now: 0))?.events, [1, 3])
        XCTAssertFalse(q.enqueue(4, bytes: 1, now: 0), "the batch in flight still counts")
        _ = q.finished(success: false, now: 0, random: 0)
        XCTAssertFalse(q.enqueue(4, bytes: 1, now: 0), "and while it waits for its retry")
        _ = sent(q.poll(now: 10_000))
        _ = q.finished(success: true, now: 10_000, random: 0)
        XCTAssertEqual(q.queuedBytes, 0)
        XCTAssertTrue(q.enqueue(4, bytes: 1000, now: 10_000))
        XCTAssertFalse(q.enqueue(5, bytes: 1001, now: 10_000))
    }

    func testFullBatchLeavesAtOnceAndOneBatchInFlight() {
        var q = Q(options: options())
        for i in 1...7 { XCTAssertTrue(q.enqueue(i, now: 0)) }
        XCTAssertEqual(q.nextDue(now: 0), 0)
        XCTAssertEqual(sent(q.poll(now: 0))?.events, [1, 2, 3])
        guard case .idle = q.poll(now: 0) else { return XCTFail("one batch in flight at a time") }
        _ = q.finished(success: true, now: 10, random: 0)
        XCTAssertEqual(sent(q.poll(now: 10))?.events, [4, 5, 6])
        _ = q.finished(success: true, now: 20, random: 0)
        // One left: waits for its flush time.
        guard case .wait(let until) = q.poll(now: 20) else { return XCTFail() }
        XCTAssertEqual(until, 200)
        XCTAssertEqual(sent(q.poll(now: 20, flushAll: true))?.events, [7])
    }

    func testRetriesSameBatchWithBackoffThenNext() {
        var q = Q(options: options(attempts: 3))
        for i in 1...4 { _ = q.enqueue(i, now: 0) }
        let first = sent(q.poll(now: 0))
        XCTAssertEqual(q.finished(success: false, now: 10, random: 0), .retry(at: 60, attempt: 1))
        XCTAssertEqual(q.nextDue(now: 10), 60)
        guard case .wait(let until) = q.poll(now: 59) else { return XCTFail() }
        XCTAssertEqual(until, 60)
        let second = sent(q.poll(now: 60))
        XCTAssertEqual(second?.sequence, first?.sequence, "same batch, same id")
        XCTAssertEqual(second?.events, first?.events)
        XCTAssertEqual(second?.attempt, 2)
        XCTAssertEqual(q.finished(success: false, now: 70, random: 0), .retry(at: 170, attempt: 2))
        let third = sent(q.poll(now: 170))
        XCTAssertEqual(third?.attempt, 3)
        XCTAssertEqual(q.depth, 4)
        XCTAssertEqual(q.finished(success: false, now: 180, random: 0), .gaveUp(events: 3, attempts: 3))
        XCTAssertEqual(q.depth, 1)
        let next = sent(q.poll(now: 1000))
        XCTAssertEqual(next?.events, [4])
        XCTAssertNotEqual(next?.sequence, first?.sequence)
    }

    func testBoundedQueueCountsInFlight() {
        var q = Q(options: options(batch: 2, capacity: 3))
        XCTAssertTrue(q.enqueue(1, now: 0))
        XCTAssertTrue(q.enqueue(2, now: 0))
        _ = sent(q.poll(now: 0))
        XCTAssertTrue(q.enqueue(3, now: 0))
        XCTAssertFalse(q.enqueue(4, now: 0), "2 in flight + 1 waiting = capacity")
        XCTAssertEqual(q.depth, 3)
        _ = q.finished(success: true, now: 1, random: 0)
        XCTAssertTrue(q.enqueue(5, now: 1))
    }

    func testFinishedWithoutSendIsIgnored() {
        var q = Q(options: options())
        XCTAssertNil(q.finished(success: true, now: 0, random: 0))
    }

    func testUnlimitedAttempts() {
        var q = Q(options: options(attempts: 0))
        _ = q.enqueue(1, now: 0)
        var now: Int64 = 0
        for attempt in 1...50 {
            let b = sent(q.poll(now: now, flushAll: true))
            XCTAssertEqual(b?.attempt, attempt)
            guard case .retry(let at, _)? = q.finished(success: false, now: now, random: 0.5) else { return XCTFail() }
            now = at
        }
    }
}

final class WebhookEventTests: XCTestCase {
    func testBodyShape() {
        let events: [WebhookEvent] = [
            .online(id: "e1", user: "alice", ts: 1),
            .offline(id: "e2", user: "alice", onlineMs: 1500, ts: 2),
            .occupied(id: "e3", room: "r", ts: 3),
            .vacated(id: "e4", room: "r", ts: 4),
            .client(id: "e5", name: "message:read", room: "r", from: "bob", payload: .object([("messageId", "m1")]), ts: 5),
        ]
        let body = String(decoding: WebhookEvent.body(batchID: "b1", node: "n1", events: events), as: UTF8.self)
        XCTAssertEqual(body, #"{"id":"b1","node":"n1","events":[{"id":"e1","type":"user:online","ts":1,"data":{"user":"alice"}},"#
            + #"{"id":"e2","type":"user:offline","ts":2,"data":{"user":"alice","onlineMs":1500}},"#
            + #"{"id":"e3","type":"room:occupied","ts":3,"data":{"room":"r"}},{"id":"e4","type":"room:vacated","ts":4,"data":{"room":"r"}},"#
            + #"{"id":"e5","type":"message:read","ts":5,"data":{"room":"r","from":"bob","payload":{"messageId":"m1"}}}]}"#)
        XCTAssertEqual(WebhookEvent.offline(id: "x", user: "u", onlineMs: -5, ts: 0).data["onlineMs"], .int(0))
    }
}
