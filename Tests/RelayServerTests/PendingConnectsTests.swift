import NIOConcurrencyHelpers
import NIOCore
import NIOEmbedded
import NIOHTTP1
import RelayCore
import XCTest

@testable import RelayServer

/// A reconnect storm's queue: CONNECTs being set up are counted, and past the limit new
/// sessions are refused at their handshake (503 `server_busy`, `Retry-After`), never the
/// sessions already open.
final class PendingConnectsTests: XCTestCase {
    private func connect(_ s: Session, _ token: String) throws {
        try s.send("40{\"token\":\"\(token)\"}")
        s.channel.embeddedEventLoop.run()
    }

    func testACONNECTCountsFromItsArrivalUntilAnsweredRefusedOrClosed() throws {
        let h = Harness { $0.connections.maxPendingConnects = 10 }
        let pending = h.relay.admission.pending
        let idle = try h.session()
        XCTAssertEqual(pending.current, 0, "a session that has not sent its 40 costs nothing and is not counted")
        let a = try h.session(), b = try h.session(), c = try h.session()
        try connect(a, "hold:alice")
        try connect(b, "hold:bob")
        try connect(c, "hold:carol")
        XCTAssertEqual(pending.current, 3)
        h.held.answerNext()
        h.loop.run()
        XCTAssertTrue(try a.texts().contains { $0.hasPrefix("40{") }, "answered")
        XCTAssertEqual(pending.current, 2)
        h.held.answerNext(refusing: .tokenExpired)
        h.loop.run()
        XCTAssertTrue(try b.texts().contains { $0.hasPrefix("44{") }, "refused, the session left open for another 40")
        XCTAssertEqual(pending.current, 1)
        _ = try? c.channel.close().wait()
        h.loop.run()
        XCTAssertEqual(pending.current, 0, "a session that closes while its CONNECT is set up gives its place back")
        h.held.answerNext()  // the check completes after the close: nothing counts twice
        h.loop.run()
        XCTAssertEqual(pending.current, 0)
        // A CONNECT again after `41` is set up like any: counted until answered.
        try a.send("41")
        try connect(a, "hold:alice")
        XCTAssertEqual(pending.current, 1)
        h.held.answerNext()
        h.loop.run()
        XCTAssertEqual(pending.current, 0)
        _ = try? idle.channel.close().wait()
    }

    func testPastTheLimitNewSessionsAreRefusedAtTheHandshakeOnly() throws {
        let h = Harness { $0.connections.maxPendingConnects = 1 }
        let open = try handshake(h)  // opened before the queue filled
        let a = try h.session()
        try connect(a, "hold:alice")
        XCTAssertTrue(h.relay.admission.pending.isFull)

        // A new polling session: 503 server_busy with Retry-After, before any session exists.
        let sessionsBefore = LiveObjects.count(.session)
        let uri = "/socket.io/?EIO=4&transport=polling"
        let busy = try XCTUnwrap(answerResponse(PollingEndpoint(relay: h.relay).handle(request(.GET, uri), query: QueryString(uri: uri), on: h.loop), h.loop))
        XCTAssertEqual(busy.status, .serviceUnavailable)
        XCTAssertTrue(busy.extraHeaders.contains { $0.0 == "retry-after" && $0.1 == "1" })
        let json = try JSONParser.parse(String(decoding: busy.body, as: UTF8.self))
        XCTAssertEqual(json["error"]?["code"]?.stringValue, "server_busy")
        XCTAssertEqual(LiveObjects.count(.session), sessionsBefore, "nothing was set up for it")

        // A WebSocket upgrade for a new session the upgrader declined: the router says why.
        var head = HTTPRequestHead(version: .http1_1, method: .GET, uri: "/socket.io/?EIO=4&transport=websocket")
        for (name, value) in [("upgrade", "websocket"), ("connection", "Upgrade"), ("sec-websocket-key", "dGhlIHNhbXBsZSBub25jZQ=="), ("sec-websocket-version", "13")] {
            head.headers.add(name: name, value: value)
        }
        let routed = HTTPRouter(relay: h.relay).route(HTTPRequest(head: head, body: [], remoteIP: "127.0.0.1", admitted: true))
        XCTAssertEqual(routed.status, .serviceUnavailable)
        XCTAssertTrue(routed.extraHeaders.contains { $0.0 == "retry-after" })

        // The session opened before is served: its 40 goes through (and counts, over the limit).
        let sidURI = "/socket.io/?EIO=4&transport=polling&sid=\(open)"
        _ = answerResponse(PollingEndpoint(relay: h.relay).handle(request(.POST, sidURI, body: "40{\"token\":\"bob\"}"), query: QueryString(uri: sidURI), on: h.loop), h.loop)
        let answer = answerResponse(PollingEndpoint(relay: h.relay).handle(request(.GET, sidURI), query: QueryString(uri: sidURI), on: h.loop), h.loop)
        XCTAssertTrue(answer.map { String(decoding: $0.body, as: UTF8.self).contains("40{") } ?? false, "an open session's CONNECT is never refused for the queue")

        // The queue drains: new sessions are let in again.
        h.held.answerNext()
        h.loop.run()
        XCTAssertFalse(h.relay.admission.pending.isFull)
        XCTAssertNoThrow(try handshake(h))
    }

    func testZeroMeansNoLimit() throws {
        let h = Harness { $0.connections.maxPendingConnects = 0 }
        for user in ["alice", "bob", "carol"] { try connect(try h.session(), "hold:\(user)") }
        XCTAssertEqual(h.relay.admission.pending.current, 3)
        XCTAssertFalse(h.relay.admission.pending.isFull, "0: no limit")
    }

    private func request(_ method: HTTPMethod, _ uri: String, body: String = "") -> HTTPRequest {
        HTTPRequest(head: HTTPRequestHead(version: .http1_1, method: method, uri: uri), body: Array(body.utf8), remoteIP: "127.0.0.1", admitted: true)
    }

    /// Opens a polling session; returns its sid.
    private func handshake(_ h: Harness) throws -> String {
        let uri = "/socket.io/?EIO=4&transport=polling"
        let open = try XCTUnwrap(answerResponse(PollingEndpoint(relay: h.relay).handle(request(.GET, uri), query: QueryString(uri: uri), on: h.loop), h.loop))
        XCTAssertEqual(open.status, .ok)
        let json = try JSONParser.parse(String(String(decoding: open.body, as: UTF8.self).dropFirst()))
        return try XCTUnwrap(json["sid"]?.stringValue)
    }

    private func answerResponse(_ future: EventLoopFuture<HTTPResponse>, _ loop: EmbeddedEventLoop) -> HTTPResponse? {
        let box = NIOLockedValueBox<HTTPResponse?>(nil)
        future.whenSuccess { r in box.withLockedValue { $0 = r } }
        loop.run()
        return box.withLockedValue { $0 }
    }
}
