import NIOConcurrencyHelpers
import NIOCore
import NIOEmbedded
import NIOHTTP1
import RelayCore
import XCTest

@testable import RelayServer

/// Long-polling under the same limits as a WebSocket, and sessions that end leave nothing.
final class PollingLimitsTests: XCTestCase {
    func message(_ text: String, key: CoalescingKey? = nil) -> OutboundMessage {
        var buffer = ByteBufferAllocator().buffer(capacity: text.utf8.count)
        buffer.writeString(text)
        return OutboundMessage(bytes: buffer, coalescingKey: key)
    }

    func testTheBufferIsBoundedInMessagesAsWellAsBytes() {
        let loop = EmbeddedEventLoop()
        let t = PollingTransport(eventLoop: loop, softLimitBytes: 1 << 20, hardLimitBytes: 1 << 20, maxMessages: 100, holdMs: 45_000)
        var violations: [UInt16] = []
        t.observers.onViolation = { code, _ in violations.append(code) }
        // 2-byte pongs: far under the byte limit, but not under the message limit.
        for _ in 0..<100 { t.send(message("3")) }
        XCTAssertEqual(violations, [])
        for _ in 0..<1000 { t.send(message("3")) }
        XCTAssertEqual(violations, [CloseCode.slowConsumer], "reported once")
        var dropped = 0
        t.observers.onDropped = { dropped += $0 }
        t.close(code: CloseCode.slowConsumer, reason: "slow consumer")
        XCTAssertEqual(dropped, 100, "what overflowed is not kept for a client that stopped reading")
        let get = loop.makePromise(of: HTTPResponse.self)
        t.poll(get)
        let box = NIOLockedValueBox<String?>(nil)
        get.futureResult.whenSuccess { r in box.withLockedValue { $0 = String(decoding: r.body, as: UTF8.self) } }
        loop.run()
        XCTAssertEqual(box.withLockedValue { $0 }, "1", "only the close is owed")
    }

    func testAttachmentsCostTheirBase64AndCoalescingWorksOverPolling() {
        var m = message("451-[\"x:y\",{}]")
        var attachment = ByteBufferAllocator().buffer(capacity: 3000)
        attachment.writeBytes([UInt8](repeating: 1, count: 3000))
        m.attachments = [attachment]
        XCTAssertEqual(PollingTransport.wireBytes(m), 14 + 1 + 2 + 4000)

        let loop = EmbeddedEventLoop()
        let t = PollingTransport(eventLoop: loop, softLimitBytes: 10, hardLimitBytes: 1 << 20, maxMessages: 100, holdMs: 45_000)
        var coalesced = 0
        t.observers.onCoalesced = { coalesced += 1 }
        let key = CoalescingKey(event: "typing:start", room: "r", user: "u")
        t.send(message("42[\"typing:start\",{\"n\":1}]", key: key))
        t.send(message("42[\"typing:start\",{\"n\":2}]", key: key))
        XCTAssertEqual(coalesced, 1, "over the soft limit the newer replaces the older, as on a WebSocket")
        XCTAssertEqual(t.waitingMessages, 1)
    }

    // MARK: Whole sessions through the endpoint

    func request(_ method: HTTPMethod, _ uri: String, body: String = "") -> HTTPRequest {
        HTTPRequest(head: HTTPRequestHead(version: .http1_1, method: method, uri: uri), body: Array(body.utf8), remoteIP: "127.0.0.1", admitted: true)
    }

    func answer(_ future: EventLoopFuture<HTTPResponse>, _ loop: EmbeddedEventLoop) -> String? {
        let box = NIOLockedValueBox<String?>(nil)
        future.whenSuccess { r in box.withLockedValue { $0 = String(decoding: r.body, as: UTF8.self) } }
        loop.run()
        return box.withLockedValue { $0 }
    }

    /// Opens a polling session; returns its sid.
    func handshake(_ h: Harness) throws -> String {
        let endpoint = PollingEndpoint(relay: h.relay)
        let open = try XCTUnwrap(answer(endpoint.handle(request(.GET, "/socket.io/?EIO=4&transport=polling"), query: QueryString(uri: "/socket.io/?EIO=4&transport=polling"), on: h.loop), h.loop))
        let json = try JSONParser.parse(String(open.dropFirst()))
        return try XCTUnwrap(json["sid"]?.stringValue)
    }

    @discardableResult
    func post(_ h: Harness, sid: String, _ body: String) -> String? {
        let uri = "/socket.io/?EIO=4&transport=polling&sid=\(sid)"
        return answer(PollingEndpoint(relay: h.relay).handle(request(.POST, uri, body: body), query: QueryString(uri: uri), on: h.loop), h.loop)
    }

    func get(_ h: Harness, sid: String) -> String? {
        let uri = "/socket.io/?EIO=4&transport=polling&sid=\(sid)"
        return answer(PollingEndpoint(relay: h.relay).handle(request(.GET, uri), query: QueryString(uri: uri), on: h.loop), h.loop)
    }

    /// Sessions that never log in, are refused, flood, leave cleanly or go silent: once they
    /// ended, no session, transport or registry entry is left.
    func testEndedPollingSessionsLeaveNothingBehind() throws {
        let h = Harness { $0.auth.authFailuresPerIP = .init(perSecond: 1000, burst: 1000) }
        let sessionsBefore = LiveObjects.count(.session)
        let transportsBefore = LiveObjects.count(.pollingTransport)
        let flood = "2" + String(repeating: "\u{1e}2", count: 1000)
        for i in 0..<200 {
            let sid = try handshake(h)
            switch i % 5 {
            case 0: break  // never CONNECTs
            case 1: post(h, sid: sid, "40{\"token\":\"wrong\"}")
            case 2: post(h, sid: sid, flood)
            case 3:
                post(h, sid: sid, "40{\"token\":\"alice\"}")
                let answer = get(h, sid: sid)
                XCTAssertTrue(answer?.hasPrefix("40{") == true, "\(String(describing: answer))")
                post(h, sid: sid, "1")
            default:
                post(h, sid: sid, "40{\"token\":\"bob\"}")  // then goes silent
            }
        }
        // Ended sessions that owe their client an answer (a refused CONNECT's close, the noop
        // after the client's own close) stay findable for 10 s, by design; flooded ones are gone
        // at once.
        XCTAssertEqual(LiveObjects.count(.session) - sessionsBefore, 160)
        h.advance(ms: 10_001)
        // Left: bob's 20 connected sessions; the 40 that never sent CONNECT and the 60 refused
        // (a refusal leaves the session open for another CONNECT, with a new deadline: bob's
        // later 20 were over his connection limit) timed out now, their close owed 10 s more.
        XCTAssertEqual(LiveObjects.count(.session) - sessionsBefore, 120, "flooded and closed sessions are gone after 10 s")
        // Connect timeout, ping timeout, the 10 s a close waits for its GET.
        for _ in 0..<12 { h.advance(ms: 10_000) }
        XCTAssertEqual(h.relay.pollingSessions.count, 0)
        XCTAssertEqual(LiveObjects.count(.session), sessionsBefore)
        XCTAssertEqual(LiveObjects.count(.pollingTransport), transportsBefore)
        XCTAssertEqual(h.relay.admission.openConnections, 0, "every polling slot was given back")
    }

    func testAFloodedPollingSessionClosesWith1008() throws {
        let h = Harness()
        let sid = try handshake(h)
        // The request that broke the limit is answered 400 and the session is gone (Engine.IO's
        // rule for a session that ended on a broken rule: no close is owed to a later GET).
        XCTAssertTrue(post(h, sid: sid, "2" + String(repeating: "\u{1e}2", count: 8191))?.contains("Bad request") == true)
        XCTAssertTrue(get(h, sid: sid)?.contains("Session ID unknown") == true)
        XCTAssertTrue(post(h, sid: sid, "2")?.contains("Session ID unknown") == true)
    }

    // MARK: Bodies

    func testAPollingSessionReadsOnePostAtATime() throws {
        let h = Harness()
        let sid = try handshake(h)
        let query = QueryString(uri: "/socket.io/?EIO=4&transport=polling&sid=\(sid)")
        guard case .read(let limit, let release?) = PollingEndpoint.bodyAdmission(for: query, relay: h.relay) else { return XCTFail("first POST") }
        XCTAssertEqual(limit, h.configuration.engine.maxConnectPayload, "before CONNECT: the small limit")
        guard case .refuse(let refusal) = PollingEndpoint.bodyAdmission(for: query, relay: h.relay) else { return XCTFail("second POST at once") }
        XCTAssertEqual(refusal.status, .badRequest)
        release()
        guard case .read(_, let again?) = PollingEndpoint.bodyAdmission(for: query, relay: h.relay) else { return XCTFail("after the first ended") }
        again()
        post(h, sid: sid, "40{\"token\":\"alice\"}")
        guard case .read(let after, let last?) = PollingEndpoint.bodyAdmission(for: query, relay: h.relay) else { return XCTFail("logged in") }
        XCTAssertEqual(after, h.configuration.engine.maxPayload)
        last()
    }

    func testAPIBodiesAreReadOnlyWithTheRightKey() {
        let h = Harness()
        let router = HTTPRouter(relay: h.relay)
        func policy(_ method: HTTPMethod, _ uri: String, key: String?) -> BodyPolicy {
            var head = HTTPRequestHead(version: .http1_1, method: method, uri: uri)
            if let key { head.headers.add(name: "authorization", value: "Bearer \(key)") }
            return router.bodyPolicy(for: head)
        }
        let api = h.configuration.auth.apiKey, admin = h.configuration.auth.adminKey
        for (uri, key) in [("/api/v1/emit", api), ("/api/v1/presence", api), ("/api/v1/users/bob/disconnect", api), ("/admin/v1/emit", admin)] {
            guard case .read(let limit, nil) = policy(.POST, uri, key: key) else { return XCTFail("\(uri) with its key") }
            XCTAssertEqual(limit, h.configuration.listener.maxHTTPBodyBytes)
            guard case .discard = policy(.POST, uri, key: nil) else { return XCTFail("\(uri) without a key") }
            guard case .discard = policy(.POST, uri, key: key + "x") else { return XCTFail("\(uri) with a wrong key") }
        }
        guard case .discard = policy(.POST, "/api/v1/emit", key: admin) else { return XCTFail("the admin key is not the API key") }
        guard case .discard = policy(.POST, "/healthz", key: nil) else { return XCTFail("no body for other routes") }
        guard case .discard = policy(.GET, "/socket.io/?EIO=4&transport=polling", key: nil) else { return XCTFail("a GET has no body") }
    }

    func testAnUnauthorizedBodyIsNeverBufferedAndGets401() throws {
        let h = Harness()
        let channel = EmbeddedChannel(loop: h.loop)
        let admission = ConnectionAdmission(admission: h.relay.admission, trusted: TrustedProxies(), connectionAddress: nil)
        try channel.pipeline.syncOperations.addHandler(HTTPHandler(relay: h.relay, router: HTTPRouter(relay: h.relay), client: admission))
        var head = HTTPRequestHead(version: .http1_1, method: .POST, uri: "/api/v1/emit")
        head.headers.add(name: "authorization", value: "Bearer wrong-key-wrong-key")
        head.headers.add(name: "content-length", value: "\(200 * 4096)")
        try channel.writeInbound(HTTPServerRequestPart.head(head))
        var chunk = channel.allocator.buffer(capacity: 4096)
        chunk.writeBytes([UInt8](repeating: 0x7B, count: 4096))
        for _ in 0..<200 { try channel.writeInbound(HTTPServerRequestPart.body(chunk)) }
        try channel.writeInbound(HTTPServerRequestPart.end(nil))
        h.loop.run()
        guard case .head(let response)? = try channel.readOutbound(as: HTTPServerResponsePart.self) else { return XCTFail("no answer") }
        XCTAssertEqual(response.status, .unauthorized)
        XCTAssertEqual(response.headers["connection"].first, "close", "a connection that sent a body nobody asked for is not kept")
        _ = try? channel.finish()
    }
}

/// The heap trimmer finds glibc's `malloc_trim` and runs it.
final class HeapTrimmerTests: XCTestCase {
    func testTrimsAfterEnoughSessionsEnded() throws {
        let loop = EmbeddedEventLoop()
        let metrics = RelayMetrics()
        let trimmer = HeapTrimmer(on: loop, interval: .seconds(1), afterSessions: 0, metrics: metrics)
        defer { trimmer.cancel() }
        #if canImport(Glibc)
        XCTAssertTrue(HeapTrimmer.isAvailable, "glibc's malloc_trim is found")
        #endif
        HeapTrimmer.trim()  // must not crash
    }
}
