import Foundation
import NIOCore
import RelayCore
import RelayTestSupport
import XCTest

@testable import RelayServer

/// The one table of settings (`ConfigurationLoader.settings`) and what is made from it: the
/// command line, `RelayConfiguration`'s defaults and `relay serve --help` (README's table:
/// `ReadmeSettingsTableTests`).
final class SettingsTests: XCTestCase {
    let keys = ["jwt-secret": "0123456789abcdef0123456789abcdef", "api-key": "0123456789abcdef", "admin-key": "0123456789abcdef"]

    func testNamesAreUniqueAndFitFlagsEnvironmentAndFiles() {
        XCTAssertEqual(Set(ConfigurationLoader.settings.map(\.name)).count, ConfigurationLoader.settings.count)
        for setting in ConfigurationLoader.settings {
            XCTAssertTrue(setting.name.allSatisfy { $0.isLowercase || $0.isNumber || $0 == "-" }, setting.name)
            XCTAssertFalse(setting.help.isEmpty, setting.name)
        }
        XCTAssertEqual(ConfigurationLoader.environmentName("max-payload"), "RELAY_MAX_PAYLOAD")
    }

    /// `RelayConfiguration()` gets the declared defaults, and the component types' own defaults
    /// (used on their own in tests and RelayCore) agree with them.
    func testDefaultsAreTheDeclaredOnes() throws {
        var fresh = RelayConfiguration(jwt: .hs256(secret: ""), apiKey: "", adminKey: "")
        for setting in ConfigurationLoader.settings {
            guard let value = setting.defaultValue else { continue }
            let problems = setting.apply(value, &fresh)
            XCTAssertEqual(problems, [], "the default of \(setting.name)")
        }
        let c = RelayConfiguration(jwt: .hs256(secret: ""), apiKey: "", adminKey: "")
        XCTAssertEqual(c.listener.host, "127.0.0.1")
        XCTAssertEqual(c.listener.port, 8080)
        XCTAssertEqual(c.auth.jwtLeewaySeconds, 30)
        XCTAssertEqual(c.receipts.retentionDays, 30)
        XCTAssertEqual(c.engine.maxPayload, 1_000_000)
        XCTAssertEqual(c.engine.maxConnectPayload, 16 * 1024)
        XCTAssertEqual(c.events.maxEventBytes, 64 * 1024)
        XCTAssertTrue(c.engine.deflateEnabled)
        XCTAssertTrue(c.events.customEventsEnabled)
        XCTAssertFalse(c.listener.proxyProtocol)
        XCTAssertFalse(c.recovery.offsetsForEverySocket)
        XCTAssertEqual(c.events.eventsPerSecond, .init(perSecond: 50, burst: 100))
        XCTAssertEqual(c.events.errorReplies, .init(perSecond: 5, burst: 20))
        XCTAssertEqual(c.receipts.perUser, .init(perSecond: 400, burst: 800))
        XCTAssertEqual(c.auth.revocationTTLSeconds, 7 * 86_400)
        XCTAssertEqual(Set(c.events.eventsPerSecondByClass.keys), Set(RateClass.allCases), "every kind has a budget")
        XCTAssertEqual(c.events.eventsPerSecondByClass[.typing], .init(perSecond: 10, burst: 20))
        XCTAssertEqual(c.events.eventsPerSecondByClass[.control], .init(perSecond: 20, burst: 50))
        // The declared defaults, as README's table and PROTOCOL §9 give them.
        XCTAssertEqual(c.events.inbound.packets, .init(perSecond: 250, burst: 500))
        XCTAssertEqual(c.events.inbound.bytes, .init(perSecond: 1_048_576, burst: 4_194_304))
        XCTAssertEqual(c.events.inbound.eventBytes, .init(perSecond: 262_144, burst: 524_288))
        XCTAssertEqual(c.recovery.historyLimits, HistoryLimits(maxEvents: 200, maxAgeMs: 120_000, maxBytes: 256 << 20, maxStreamBytes: 2 << 20))
        XCTAssertEqual(c.connections.maxLiveSharesPerConnection, 16)
        XCTAssertEqual(c.connections.maxConnectionsPerUser, 20)
        XCTAssertEqual(c.connections.maxPendingConnects, 1_000)
        XCTAssertEqual(c.cluster.heartbeatMs, 2_000)
        var webhooks = WebhookSettings()
        (webhooks.batchSize, webhooks.flushMs, webhooks.queueSize, webhooks.queueBytes) = (100, 200, 10_000, 64 << 20)
        (webhooks.maxAttempts, webhooks.maxBackoffMs, webhooks.timeoutMs) = (12, 30_000, 10_000)
        XCTAssertEqual(c.webhooks, webhooks)
        XCTAssertEqual(c.listener.eventLoopThreads, max(1, NIOCore.System.coreCount - 1), "threads: unset means one loop per core but one")

        // Resolving nothing but the keys gives the same configuration.
        var r = ConfigurationLoader.resolve(flags: keys, environment: [:], file: [:])
        let built = try ConfigurationLoader.build(&r).0
        XCTAssertEqual(built.sessionConfiguration, c.sessionConfiguration)
        XCTAssertEqual(built.connections.maxConnections, c.connections.maxConnections)
        XCTAssertEqual(built.webhooks, c.webhooks)
    }

    func testTheDrainSpreadsOnlyWhenOtherNodesTakeTheSockets() {
        var lifecycle = LifecycleSettings()
        XCTAssertEqual(lifecycle.drainBatch(otherNodes: false), .max, "a node alone tells every socket at once")
        XCTAssertEqual(lifecycle.drainBatch(otherNodes: true), 200, "2 000 a second in a cluster, ten batches a second")
        lifecycle.drainRatePerSecond = 20
        XCTAssertEqual(lifecycle.drainBatch(otherNodes: false), 2, "a rate set is kept, alone or not")
        XCTAssertEqual(lifecycle.drainBatch(otherNodes: true), 2)
        lifecycle.drainRatePerSecond = 5
        XCTAssertEqual(lifecycle.drainBatch(otherNodes: true), 1, "at least one a round")
    }

    func testTheCommandLine() throws {
        let flags = try ConfigurationLoader.parseArguments([
            "--port", "0", "--max-payload", "2000", "--no-deflate", "--rate", "typing=10:20", "--rate=custom=5", "--log-level", "warning",
            "--webhook-url", "http://127.0.0.1:9/a,http://127.0.0.1:9/b", "--webhook-url", "http://127.0.0.1:9/c", "--webhook-secret", keys["jwt-secret"] ?? "",
            "--proxy-protocol", "--trusted-proxies", "10.0.0.0/8", "--max-event-bytes=4000", "--disable-custom-events", "--port", "1",
        ])
        XCTAssertEqual(flags["port"], "1", "a setting given twice keeps the last")
        XCTAssertEqual(flags["no-deflate"], "true", "an on/off flag alone is on")
        XCTAssertEqual(flags["rate"], "typing=10:20,custom=5", "a list flag may be repeated")
        var r = ConfigurationLoader.resolve(flags: flags.merging(keys) { a, _ in a }, environment: [:], file: [:])
        let c = try ConfigurationLoader.build(&r).0
        XCTAssertEqual(c.listener.port, 1)
        XCTAssertEqual(c.engine.maxPayload, 2000)
        XCTAssertEqual(c.events.maxEventBytes, 4000)
        XCTAssertFalse(c.engine.deflateEnabled)
        XCTAssertFalse(c.events.customEventsEnabled)
        XCTAssertTrue(c.listener.proxyProtocol)
        XCTAssertEqual(c.events.eventsPerSecondByClass[.custom], .init(perSecond: 5, burst: 10))
        XCTAssertEqual(c.events.eventsPerSecondByClass[.typing], .init(perSecond: 10, burst: 20))
        XCTAssertEqual(c.events.eventsPerSecondByClass[.receipt], .init(perSecond: 200, burst: 400), "a kind not given keeps its default")
        XCTAssertEqual(c.webhooks.urls, ["http://127.0.0.1:9/a", "http://127.0.0.1:9/b", "http://127.0.0.1:9/c"])
        XCTAssertEqual(r["log-level"]?.value, "warning")
        XCTAssertEqual(try ConfigurationLoader.parseArguments(["--proxy-protocol=false"])["proxy-protocol"], "false")
        XCTAssertEqual(try ConfigurationLoader.parseArguments([]), [:])
    }

    func testCommandLineMistakesAreNamed() {
        XCTAssertThrowsError(try ConfigurationLoader.parseArguments(["--bogus", "1", "--port", "--max-payload", "5", "stray", "--host"])) { error in
            XCTAssertEqual((error as? ConfigurationLoader.ConfigError)?.problems, [
                "unknown setting --bogus (relay serve --help lists them)",
                "--port: missing value",
                "unexpected argument stray: settings are given as --NAME VALUE",
                "--host: missing value",
            ])
        }
    }

    func testProblemsNameTheSettingWhatItExpectsAndWhatItGot() {
        var r = ConfigurationLoader.resolve(
            flags: keys.merging(["log-level": "loud", "packets-per-second": "0.5", "port": "70000", "proxy-protocol": "maybe", "metrics-key": "short-secret"]) { a, _ in a },
            environment: ["RELAY_MAX_PAYLOAD": "abc"], file: [:])
        XCTAssertThrowsError(try ConfigurationLoader.build(&r)) { error in
            let problems = (error as? ConfigurationLoader.ConfigError)?.problems ?? []
            XCTAssertEqual(problems, [
                "port: expected an integer from 0 to 65535, got 70000",
                "max-payload: expected an integer ≥ 16, got abc",
                "packets-per-second: expected a number ≥ 1, got 0.5",
                "proxy-protocol: expected true or false, got maybe",
                "metrics-key: must be at least 16 characters (got 12)",
                "log-level: expected one of trace, debug, info, notice, warning, error, critical, got loud",
            ])
            XCTAssertFalse(problems.joined().contains("short-secret"), "a secret is never echoed")
        }
    }

    func testHelpListsEverySettingWithItsDefault() {
        let help = ConfigurationLoader.helpText()
        for setting in ConfigurationLoader.settings { XCTAssertTrue(help.contains("  --\(setting.name)"), setting.name) }
        XCTAssertTrue(help.contains("--max-payload <integer> (default: 1000000)"), help)
        XCTAssertTrue(help.contains("--no-deflate (default: off)"), help)
        XCTAssertTrue(help.contains("--jwt-secret <text> (default: dev mode)"), help)
        XCTAssertFalse(help.contains("`"), "no Markdown in a terminal")
    }
}
