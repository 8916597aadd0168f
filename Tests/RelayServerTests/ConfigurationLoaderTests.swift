import Foundation
import Logging
import NIOConcurrencyHelpers
import RelayCore
import RelayTestSupport
import XCTest

@testable import RelayServer

final class ConfigurationLoaderTests: XCTestCase {
    let secret = "0123456789abcdef0123456789abcdef"

    func testPrecedenceFlagThenEnvironmentThenFileThenDefault() throws {
        var r = ConfigurationLoader.resolve(
            flags: ["port": "1"],
            environment: ["RELAY_PORT": "2", "RELAY_MAX_PAYLOAD": "3000", "RELAY_JWT_SECRET": secret],
            file: ["port": "4", "max-payload": "5000", "max-event-bytes": "6000", "api-key": "0123456789abcdef", "admin-key": "fedcba9876543210"])
        XCTAssertEqual(r["port"]?.value, "1")
        XCTAssertEqual(r["port"]?.source, .flag)
        XCTAssertEqual(r["max-payload"]?.source, .environment)
        XCTAssertEqual(r["max-event-bytes"]?.source, .file)
        XCTAssertEqual(r["ping-interval"]?.source, .default)
        let (c, dev) = try ConfigurationLoader.build(&r)
        XCTAssertFalse(dev)
        XCTAssertEqual(c.listener.port, 1)
        XCTAssertEqual(c.engine.maxPayload, 3000)
        XCTAssertEqual(c.events.maxEventBytes, 6000)
        XCTAssertEqual(c.engine.pingIntervalMs, 25_000)
        XCTAssertEqual(c.auth.jwtLeewaySeconds, 30)
        var r2 = ConfigurationLoader.resolve(flags: ["jwt-leeway": "5"], environment: ["RELAY_JWT_SECRET": secret, "RELAY_API_KEY": "0123456789abcdef", "RELAY_ADMIN_KEY": "0123456789abcdef"], file: [:])
        XCTAssertEqual(try ConfigurationLoader.build(&r2).0.auth.jwtLeewaySeconds, 5)
    }

    func testTheInboundLimitsAndTheirBounds() throws {
        let keys = ["jwt-secret": secret, "api-key": "0123456789abcdef", "admin-key": "0123456789abcdef"]
        var defaults = ConfigurationLoader.resolve(flags: keys, environment: [:], file: [:])
        let d = try ConfigurationLoader.build(&defaults).0
        XCTAssertEqual(d.events.inbound.packets, .init(perSecond: 250, burst: 500))
        XCTAssertEqual(d.events.inbound.bytes, .init(perSecond: 1_048_576, burst: 4_194_304))
        XCTAssertEqual(d.events.inbound.eventBytes, .init(perSecond: 262_144, burst: 524_288))
        XCTAssertEqual(d.connections.outboundHardLimitBytes, 1 << 20)
        XCTAssertLessThanOrEqual(d.events.inbound.eventBytes.burst * 2, Double(d.connections.outboundHardLimitBytes), "one sender's burst is half a reader's queue")
        XCTAssertEqual(d.webhooks.queueBytes, 64 << 20)
        XCTAssertEqual(d.recovery.historyLimits.maxStreamBytes, 2 << 20)

        var set = ConfigurationLoader.resolve(flags: keys.merging([
            "packets-per-second": "10", "inbound-bytes-per-second": "2048", "event-bytes-per-second": "1000",
            "max-event-bytes": "800000", "max-payload": "900000", "webhook-queue-bytes": "4096", "history-stream-bytes": "5000",
        ]) { a, _ in a }, environment: [:], file: [:])
        let c = try ConfigurationLoader.build(&set).0
        XCTAssertEqual(c.events.inbound.packets, .init(perSecond: 10, burst: 20))
        XCTAssertEqual(c.events.inbound.bytes.perSecond, 2048)
        XCTAssertEqual(c.events.inbound.bytes.burst, 1_800_000, "at least two messages of max-payload")
        XCTAssertEqual(c.events.inbound.eventBytes.burst, 800_000, "at least one event of max-event-bytes")
        XCTAssertEqual(c.connections.outboundHardLimitBytes, 1_600_000, "two of the largest events fit every reader's queue")
        XCTAssertEqual(c.sessionConfiguration.budgets.inbound, c.events.inbound)
        XCTAssertEqual(c.webhooks.queueBytes, 4096)
        XCTAssertEqual(c.recovery.historyLimits.maxStreamBytes, 5000)

        var bad = ConfigurationLoader.resolve(flags: keys.merging(["packets-per-second": "0"]) { a, _ in a }, environment: [:], file: [:])
        XCTAssertThrowsError(try ConfigurationLoader.build(&bad))
    }

    func testTrustedProxiesAndProxyProtocol() throws {
        let keys = ["jwt-secret": secret, "api-key": "0123456789abcdef", "admin-key": "0123456789abcdef"]
        var r = ConfigurationLoader.resolve(flags: keys.merging(["proxy-protocol": "true"]) { a, _ in a }, environment: ["RELAY_TRUSTED_PROXIES": "10.0.0.0/8, 127.0.0.1,fd00::/8"], file: [:])
        let c = try ConfigurationLoader.build(&r).0
        XCTAssertTrue(c.listener.proxyProtocol)
        XCTAssertEqual(c.listener.trustedProxies.ranges.map(\.description), ["10.0.0.0/8", "127.0.0.1", "fd00::/8"])
        var defaults = ConfigurationLoader.resolve(flags: keys, environment: [:], file: [:])
        let d = try ConfigurationLoader.build(&defaults).0
        XCTAssertFalse(d.listener.proxyProtocol)
        XCTAssertTrue(d.listener.trustedProxies.isEmpty)

        var bad = ConfigurationLoader.resolve(flags: keys.merging(["trusted-proxies": "10.1.0.0/8,lb.internal,10.0.0.0/40"]) { a, _ in a }, environment: [:], file: [:])
        XCTAssertThrowsError(try ConfigurationLoader.build(&bad)) { error in
            let problems = (error as? ConfigurationLoader.ConfigError)?.problems ?? []
            XCTAssertEqual(problems.count, 3, "\(problems)")
            XCTAssertTrue(problems[0].contains("did you mean 10.0.0.0/8"), problems[0])
            XCTAssertTrue(problems[1].contains("\"lb.internal\": not an IPv4 or IPv6 address"), problems[1])
            XCTAssertTrue(problems[2].contains("0…32"), problems[2])
        }
        var lonely = ConfigurationLoader.resolve(flags: keys.merging(["proxy-protocol": "true"]) { a, _ in a }, environment: [:], file: [:])
        XCTAssertThrowsError(try ConfigurationLoader.build(&lonely)) { error in
            XCTAssertEqual((error as? ConfigurationLoader.ConfigError)?.problems.first?.hasPrefix("proxy-protocol: needs trusted-proxies"), true)
        }
    }

    func testSecretsAreRedactedWhenDescribed() throws {
        var r = ConfigurationLoader.resolve(flags: ["jwt-secret": secret, "api-key": "api-key-0123456789", "admin-key": "admin-key-0123456789"], environment: [:], file: [:])
        _ = try ConfigurationLoader.build(&r)
        let text = ConfigurationLoader.describe(r)
        XCTAssertFalse(text.contains(secret))
        XCTAssertFalse(text.contains("api-key-0123456789"))
        XCTAssertTrue(text.contains("jwt-secret = <redacted>  (flag)"))
    }

    func testDevModeGeneratesCredentials() throws {
        var r = ConfigurationLoader.resolve(flags: [:], environment: [:], file: [:])
        let (c, dev) = try ConfigurationLoader.build(&r)
        XCTAssertTrue(dev)
        XCTAssertEqual(r["jwt-secret"]?.source, .generated)
        guard case .hs256(let s) = c.auth.jwt else { return XCTFail("expected HS256") }
        XCTAssertGreaterThanOrEqual(s.utf8.count, 32)
        XCTAssertGreaterThanOrEqual(c.auth.apiKey.utf8.count, 16)
    }

    func testEveryProblemIsReportedAtOnce() {
        var r = ConfigurationLoader.resolve(
            flags: ["jwt-secret": "short", "port": "99999", "rate": "typing=fast", "log-format": "xml", "redis": "http://x"],
            environment: [:], file: [:])
        XCTAssertThrowsError(try ConfigurationLoader.build(&r)) { error in
            let problems = (error as? ConfigurationLoader.ConfigError)?.problems ?? []
            XCTAssertTrue(problems.contains { $0.hasPrefix("jwt-secret") }, "\(problems)")
            XCTAssertTrue(problems.contains { $0.hasPrefix("port") })
            XCTAssertTrue(problems.contains { $0.hasPrefix("rate") })
            XCTAssertTrue(problems.contains { $0.hasPrefix("log-format") })
            XCTAssertTrue(problems.contains { $0.hasPrefix("redis") })
            XCTAssertTrue(problems.contains { $0.hasPrefix("api-key") }, "keys are required outside dev mode")
        }
    }

    func testConfigFileKeysTypesAndUnknownKeys() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("relay-config-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let good = dir.appendingPathComponent("good.json")
        try #"{"port": 9000, "disable-custom-events": true, "allowed-origins": ["https://a.example", "https://b.example"], "events-per-second": 12.5}"#.write(to: good, atomically: true, encoding: .utf8)
        let values = try ConfigurationLoader.readFile(good.path)
        XCTAssertEqual(values["port"], "9000")
        XCTAssertEqual(values["disable-custom-events"], "true")
        XCTAssertEqual(values["allowed-origins"], "https://a.example,https://b.example")
        var r = ConfigurationLoader.resolve(flags: ["jwt-secret": secret, "api-key": "0123456789abcdef", "admin-key": "0123456789abcdef"], environment: [:], file: values)
        let (c, _) = try ConfigurationLoader.build(&r)
        XCTAssertFalse(c.events.customEventsEnabled)
        XCTAssertEqual(c.listener.allowedOrigins, ["https://a.example", "https://b.example"])
        XCTAssertEqual(c.events.eventsPerSecond.perSecond, 12.5)

        let bad = dir.appendingPathComponent("bad.json")
        try #"{"prot": 1, "port": "x"}"#.write(to: bad, atomically: true, encoding: .utf8)
        XCTAssertThrowsError(try ConfigurationLoader.readFile(bad.path)) { error in
            XCTAssertEqual((error as? ConfigurationLoader.ConfigError)?.problems.count, 1, "unknown key prot")
        }
        XCTAssertThrowsError(try ConfigurationLoader.readFile(dir.appendingPathComponent("missing.json").path))
    }

    func testJSONLogLinesCarryMetadata() {
        let lines = NIOLockedValueBox<[String]>([])
        var handler = JSONLogHandler(label: "relay") { line in lines.withLockedValue { $0.append(line) } }
        handler.logLevel = .info
        let logger = Logger(label: "relay") { _ in handler }
        logger.info("connect", metadata: ["sid": "abc", "user": "alice"])
        logger.debug("hidden")
        let written = lines.withLockedValue { $0 }
        XCTAssertEqual(written.count, 1)
        let json = try? JSONParser.parse(written[0].trimmingCharacters(in: .newlines))
        XCTAssertEqual(json?["message"], "connect")
        XCTAssertEqual(json?["level"], "info")
        XCTAssertEqual(json?["sid"], "abc")
        XCTAssertEqual(json?["user"], "alice")
    }
}
