import Crypto
import Foundation
import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOEmbedded
import NIOHTTP1
import NIOPosix
import RelayCore
import XCTest

@testable import RelayServer
@testable import RelayBackends

/// A webhook receiver on 127.0.0.1: records every request, answers with `status(n)` for the
/// `n`th request (0-based).
final class WebhookReceiver: @unchecked Sendable {
    struct Request: Sendable {
        var headers: HTTPHeaders
        var body: [UInt8]
        var status: Int
        var json: JSONValue? { try? JSONParser.parse(body) }
    }

    private final class Handler: ChannelInboundHandler, @unchecked Sendable {
        typealias InboundIn = HTTPServerRequestPart
        typealias OutboundOut = HTTPServerResponsePart
        let receiver: WebhookReceiver
        var head: HTTPRequestHead?
        var body: [UInt8] = []
        init(_ receiver: WebhookReceiver) { self.receiver = receiver }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            switch unwrapInboundIn(data) {
            case .head(let h): head = h; body = []
            case .body(var b): body += b.readBytes(length: b.readableBytes) ?? []
            case .end:
                let status = receiver.record(headers: head?.headers ?? [:], body: body)
                var headers = HTTPHeaders()
                headers.add(name: "Content-Length", value: "0")
                context.write(wrapOutboundOut(.head(HTTPResponseHead(version: .http1_1, status: HTTPResponseStatus(statusCode: status), headers: headers))), promise: nil)
                context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: nil)
            }
        }
    }

    private let lock = NIOLock()
    private var _requests: [Request] = []
    private let status: @Sendable (Int) -> Int
    private var channel: (any Channel)?
    let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)

    init(status: @escaping @Sendable (Int) -> Int = { _ in 200 }) throws {
        self.status = status
        channel = try ServerBootstrap(group: group)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.configureHTTPServerPipeline()
                    try channel.pipeline.syncOperations.addHandler(Handler(self))
                }
            }
            .bind(host: "127.0.0.1", port: 0).wait()
    }

    var url: String { "http://127.0.0.1:\(channel?.localAddress?.port ?? 0)/hook" }
    var requests: [Request] { lock.withLock { _requests } }

    fileprivate func record(headers: HTTPHeaders, body: [UInt8]) -> Int {
        lock.withLock {
            let s = status(_requests.count)
            _requests.append(Request(headers: headers, body: body, status: s))
            return s
        }
    }

    /// Waits (bounded) until `check` holds.
    func wait(timeout: TimeInterval = 10, _ what: String, until check: ([Request]) -> Bool) throws {
        let deadline = Date().addingTimeInterval(timeout)
        while !check(requests) {
            guard Date() < deadline else { throw ReceiverTimeout(what: what, requests: requests.count) }
            Thread.sleep(forTimeInterval: 0.01)
        }
    }

    func stop() {
        try? channel?.close().wait()
        try? group.syncShutdownGracefully()
    }
}

struct ReceiverTimeout: Error { var what: String; var requests: Int }

final class WebhookSettingsTests: XCTestCase {
    let secret = "0123456789abcdef0123456789abcdef"

    private func build(_ flags: [String: String]) throws(ConfigurationLoader.ConfigError) -> RelayConfiguration {
        var r = ConfigurationLoader.resolve(
            flags: flags, environment: ["RELAY_JWT_SECRET": secret, "RELAY_API_KEY": "0123456789abcdef", "RELAY_ADMIN_KEY": "0123456789abcdef"], file: [:])
        return try ConfigurationLoader.build(&r).0
    }

    func testFlagsBecomeSettings() throws {
        let c = try build([
            "webhook-url": "http://127.0.0.1:9/a, https://hooks.example/b", "webhook-secret": secret, "webhook-events": "message:read,chat:seen",
            "webhook-batch-size": "7", "webhook-flush-ms": "50", "webhook-queue-size": "99", "webhook-max-attempts": "0",
            "webhook-max-backoff-ms": "1000", "webhook-timeout-ms": "2000",
        ])
        XCTAssertEqual(c.webhooks.urls, ["http://127.0.0.1:9/a", "https://hooks.example/b"])
        XCTAssertEqual(c.webhooks.clientEvents, ["message:read", "chat:seen"])
        XCTAssertEqual(c.webhooks.batchSize, 7)
        XCTAssertEqual(c.webhooks.flushMs, 50)
        XCTAssertEqual(c.webhooks.queueSize, 99)
        XCTAssertEqual(c.webhooks.maxAttempts, 0)
        XCTAssertEqual(c.webhooks.maxBackoffMs, 1000)
        XCTAssertEqual(c.webhooks.timeoutMs, 2000)
        XCTAssertFalse(try build([:]).webhooks.isEnabled)
    }

    func testEnvironmentAndSecretRedaction() throws {
        var r = ConfigurationLoader.resolve(
            flags: [:],
            environment: ["RELAY_JWT_SECRET": secret, "RELAY_API_KEY": "0123456789abcdef", "RELAY_ADMIN_KEY": "0123456789abcdef",
                          "RELAY_WEBHOOK_URL": "http://127.0.0.1:1/h", "RELAY_WEBHOOK_SECRET": secret],
            file: ["webhook-url": "http://127.0.0.1:2/file"])
        XCTAssertEqual(r["webhook-url"]?.source, .environment)
        let c = try ConfigurationLoader.build(&r).0
        XCTAssertEqual(c.webhooks.urls, ["http://127.0.0.1:1/h"])
        XCTAssertFalse(ConfigurationLoader.describe(r).contains(secret))
        XCTAssertTrue(ConfigurationLoader.describe(r).contains("webhook-secret = <redacted>"))
    }

    func testProblems() {
        XCTAssertThrowsError(try build(["webhook-url": "ftp://x/hook", "webhook-secret": "short", "webhook-events": "Bad Name"])) { error in
            let text = "\(error)"
            XCTAssertTrue(text.contains("webhook-url: must be an http:// or https:// URL"), text)
            XCTAssertTrue(text.contains("webhook-secret: must be at least 32 characters"), text)
            XCTAssertTrue(text.contains("webhook-events: Bad Name"), text)
            XCTAssertFalse(text.contains("short"), "the secret is not echoed")
        }
        XCTAssertThrowsError(try build(["webhook-url": "http://127.0.0.1:1/h"])) { error in
            XCTAssertTrue("\(error)".contains("webhook-secret: required"))
        }
        XCTAssertThrowsError(try build(["webhook-url": "http:///nohost", "webhook-secret": secret]))
    }

    func testRedactedURL() {
        XCTAssertEqual(WebhookDispatcher.redacted("https://user:pw@hooks.example/x@y"), "https://hooks.example/x@y")
        XCTAssertEqual(WebhookDispatcher.redacted("http://127.0.0.1:8/h"), "http://127.0.0.1:8/h")
    }
}

final class WebhookDeliveryTests: XCTestCase {
    let secret = "whsec-0123456789abcdef0123456789abcdef"

    /// The receiver's side of §13: parse the header, recompute, compare.
    func verifies(_ r: WebhookReceiver.Request, secret: String) -> Bool {
        guard let header = r.headers.first(name: "X-Relay-Signature"), let parsed = WebhookSignature.parse(header) else { return false }
        let mac = HMAC<SHA256>.authenticationCode(for: WebhookSignature.signedBytes(timestamp: parsed.timestamp, body: r.body), using: SymmetricKey(data: Array(secret.utf8)))
        let now = Int64(Date().timeIntervalSince1970)
        return WebhookSignature.isFresh(timestamp: parsed.timestamp, now: now)
            && parsed.signatures.contains { WebhookSignature.constantTimeEquals($0, WebhookSignature.hex(mac)) }
    }

    func testSignedHeaders() {
        let body = Array(#"{"id":"b","node":"n","events":[]}"#.utf8)
        let headers = WebhookDispatcher.headers(body: body, timestamp: 1_700_000_000, key: SymmetricKey(data: Array(secret.utf8)), batchID: "b", attempt: 2)
        let expected = HMAC<SHA256>.authenticationCode(for: Array("1700000000.".utf8) + body, using: SymmetricKey(data: Array(secret.utf8)))
        XCTAssertEqual(headers.first(name: "X-Relay-Signature"), "t=1700000000,v1=" + WebhookSignature.hex(expected))
        XCTAssertEqual(headers.first(name: "X-Relay-Delivery"), "b")
        XCTAssertEqual(headers.first(name: "X-Relay-Attempt"), "2")
        XCTAssertEqual(headers.first(name: "Content-Type"), "application/json")
    }

    private func webhooks(_ receiver: WebhookReceiver, clock: RelayClock = .system, configure: (inout WebhookSettings) -> Void = { _ in }) -> Webhooks? {
        // The declared defaults (the settings table), then what these tests shorten.
        var s = RelayConfiguration(jwt: .hs256(secret: String(repeating: "s", count: 32)), apiKey: "a", adminKey: "b").webhooks
        s.urls = [receiver.url]
        s.secret = secret
        s.flushMs = 20
        s.minBackoffMs = 10
        s.maxBackoffMs = 40
        configure(&s)
        return Webhooks.make(settings: s, nodeID: "n1", cluster: nil, clock: clock, metrics: RelayMetrics(), logger: Logger(label: "test"))
    }

    private func events(_ requests: [WebhookReceiver.Request]) -> [JSONValue] {
        var seen = Set<String>()
        var out: [JSONValue] = []
        for r in requests where r.status == 200 {
            guard case .array(let events)? = r.json?["events"] else { continue }
            for e in events { if let id = e["id"]?.stringValue, seen.insert(id).inserted { out.append(e) } }
        }
        return out
    }

    func testRetriesUntilDeliveredWithTheSameIDsAndBody() throws {
        let receiver = try WebhookReceiver(status: { $0 < 3 ? 503 : 200 })
        defer { receiver.stop() }
        let hooks = try XCTUnwrap(webhooks(receiver) { $0.clientEvents = ["message:read"] })
        hooks.userPresence("alice", present: true)
        hooks.roomOccupancy("conversation:1", present: true)
        hooks.clientEvent(name: "message:read", room: "conversation:1", from: "alice", payload: .object([("messageId", "m1")]), ts: 5)
        hooks.clientEvent(name: "note:new", room: "conversation:1", from: "alice", payload: .object([]), ts: 6)
        try receiver.wait("delivered") { $0.contains { $0.status == 200 } }
        let requests = receiver.requests
        XCTAssertEqual(requests.count, 4)
        XCTAssertTrue(requests.allSatisfy { verifies($0, secret: secret) })
        XCTAssertFalse(verifies(requests[0], secret: secret + "x"))
        XCTAssertEqual(Set(requests.map(\.body)).count, 1, "every attempt carries the same body")
        XCTAssertEqual(Set(requests.compactMap { $0.headers.first(name: "X-Relay-Delivery") }).count, 1)
        XCTAssertEqual(requests.compactMap { $0.headers.first(name: "X-Relay-Attempt") }, ["1", "2", "3", "4"])
        XCTAssertEqual(events(requests).compactMap { $0["type"]?.stringValue }, ["user:online", "room:occupied", "message:read"])
        let read = events(requests)[2]
        XCTAssertEqual(read["data"]?["from"], "alice")
        XCTAssertEqual(read["data"]?["payload"]?["messageId"], "m1")
        XCTAssertEqual(read["ts"], .int(5))
        // The dispatcher drops the batch once it has read the 200, just after the receiver saw it.
        try receiver.wait("the delivered batch leaves the queue") { _ in hooks.dispatcher.depth == 0 }
    }

    func testOfflineCarriesHowLongTheUserWasOnline() throws {
        let receiver = try WebhookReceiver()
        defer { receiver.stop() }
        let clock = ManualClock()
        let hooks = try XCTUnwrap(webhooks(receiver, clock: clock.relayClock) { $0.flushMs = 0 })
        hooks.userPresence("alice", present: true)
        clock.advance(ms: 1500)
        hooks.userPresence("alice", present: false)
        try receiver.wait("both") { self.events($0).count == 2 }
        let e = events(receiver.requests)
        XCTAssertEqual(e[0]["type"], "user:online")
        XCTAssertEqual(e[1]["type"], "user:offline")
        XCTAssertEqual(e[1]["data"]?["onlineMs"], .int(1500))
        XCTAssertEqual(e[1]["data"]?["user"], "alice")
        XCTAssertNotEqual(e[0]["id"], e[1]["id"])
    }

    func testGivesUpAfterMaxAttemptsThenGoesOn() throws {
        let receiver = try WebhookReceiver(status: { $0 < 2 ? 500 : 200 })
        defer { receiver.stop() }
        let hooks = try XCTUnwrap(webhooks(receiver) { $0.maxAttempts = 2; $0.batchSize = 1; $0.flushMs = 0 })
        hooks.roomOccupancy("r1", present: true)
        try receiver.wait("two failures") { $0.count == 2 }
        hooks.roomOccupancy("r2", present: true)
        try receiver.wait("next batch") { $0.contains { $0.status == 200 } }
        XCTAssertEqual(events(receiver.requests).compactMap { $0["data"]?["room"]?.stringValue }, ["r2"])
    }

    /// The hub tells the webhooks about first/last sockets and members, on one node.
    func testHubDecidesOnOneNode() throws {
        let receiver = try WebhookReceiver()
        defer { receiver.stop() }
        let loop = EmbeddedEventLoop()
        let clock = ManualClock()
        let hooks = try XCTUnwrap(webhooks(receiver, clock: clock.relayClock) { $0.flushMs = 0 })
        let c = RelayConfiguration(jwt: .hs256(secret: String(repeating: "s", count: 32)), apiKey: String(repeating: "a", count: 16), adminKey: String(repeating: "b", count: 16))
        let hub = Hub(eventLoops: [loop], configuration: c, clock: clock.relayClock, webhooks: hooks)
        let shard = hub.partition(for: loop)
        let a1 = RecordingSink(1), a2 = RecordingSink(2)
        try hub.membership.register(a1, sid: "s1", user: "alice", on: shard)
        try hub.membership.register(a2, sid: "s2", user: "alice", on: shard)
        _ = try hub.membership.join(room: "conversation:1", sink: a1, user: "alice", on: shard)
        _ = try hub.membership.join(room: "conversation:1", sink: a2, user: "alice", on: shard)
        XCTAssertTrue(hub.membership.leave(room: "conversation:1", connection: a1.connectionID, on: shard))
        clock.advance(ms: 700)
        hub.membership.unregister(a1.connectionID, sid: "s1", user: "alice", on: shard)
        hub.membership.unregister(a2.connectionID, sid: "s2", user: "alice", on: shard)
        loop.run()
        try receiver.wait("four events") { self.events($0).count == 4 }
        let e = events(receiver.requests)
        XCTAssertEqual(e.compactMap { $0["type"]?.stringValue }, ["user:online", "room:occupied", "user:offline", "room:vacated"])
        XCTAssertEqual(e[2]["data"]?["onlineMs"], .int(700))
    }
}
