// swift-tools-version: 6.0
import PackageDescription

/// Cross-module optimisation of the library targets, for Relay's own release binary only: set
/// `RELAY_CROSS_MODULE_OPTIMIZATION=1` when building it (scripts/run.sh and deploy/Dockerfile
/// do). SwiftPM refuses a versioned dependency whose library products reach `unsafeFlags`, and
/// there is no supported setting for it, so a package that depends on RelayCore or RelayServer
/// (no variable) gets none. Measured in docs/BENCHMARKS.md ("Cross-module optimisation"): the
/// same CPU per delivery in a room of 100, about 5 % more in rooms of 5 without it.
let crossModuleOptimization: [SwiftSetting] =
    Context.environment["RELAY_CROSS_MODULE_OPTIMIZATION"] == "1"
    ? [.unsafeFlags(["-cross-module-optimization"], .when(configuration: .release))] : []

let package = Package(
    name: "Relay",
    platforms: [.macOS(.v14)],
    products: [
        .executable(name: "relay", targets: ["relay"]),
        .library(name: "RelayCore", targets: ["RelayCore"]),
        .library(name: "RelayServer", targets: ["RelayServer"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.80.0"),
        .package(url: "https://github.com/apple/swift-log.git", from: "1.16.0"),
        .package(url: "https://github.com/apple/swift-metrics.git", from: "2.5.0"),
        .package(url: "https://github.com/apple/swift-argument-parser.git", from: "1.5.0"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle.git", from: "2.6.0"),
        .package(url: "https://github.com/vapor/jwt-kit.git", from: "5.0.0"),
        .package(url: "https://github.com/groue/GRDB.swift.git", from: "7.0.0"),
        .package(url: "https://github.com/apple/swift-crypto.git", "3.0.0"..<"5.0.0"),
        .package(url: "https://github.com/HdrHistogram/hdrhistogram-swift.git", from: "0.1.0"),
        .package(url: "https://github.com/apple/swift-nio-ssl.git", from: "2.27.0"),
        .package(url: "https://github.com/apple/swift-atomics.git", from: "1.2.0"),
        .package(url: "https://github.com/swift-server/async-http-client.git", from: "1.20.0"),
    ],
    targets: [
        // Pure logic: no sockets, no event loops. Tested without a socket.
        .target(
            name: "RelayCore",
            dependencies: [],
            swiftSettings: crossModuleOptimization
        ),
        // zlib from the system (zlib1g-dev), for permessage-deflate.
        .systemLibrary(name: "CZlib", path: "Sources/CZlib", pkgConfig: "zlib", providers: [.apt(["zlib1g-dev"])]),
        // The CPU's prefetch hint (`__builtin_prefetch`), which Swift does not expose: the
        // fan-out walk asks for the next sockets' objects while it writes the current one.
        .target(name: "CPrefetch"),
        // The locks every shared state is behind, counted per thread in debug builds so that the
        // socket writes can assert none is held (AuditedLock, AuditedCondition, LockAudit).
        .target(
            name: "RelayLocks",
            dependencies: [
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
            ],
            swiftSettings: crossModuleOptimization
        ),
        // Durable delivery receipts: SQLite through GRDB, group commit on its own thread.
        .target(
            name: "RelayStore",
            dependencies: [
                "RelayCore",
                "RelayLocks",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        // A small Redis client on SwiftNIO (RESP2/RESP3, pipelining, pub/sub): cluster fan-out.
        .target(
            name: "RelayRedis",
            dependencies: [
                "RelayLocks",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        // The delivery path's contracts and their in-memory implementations: Broker,
        // PresenceManager, KeptSessionStore, publications; and the small concurrency tools the
        // server is built from (lock stripes, the deadline scheduler, the clock).
        .target(
            name: "RelayBackends",
            dependencies: [
                "RelayCore",
                "RelayLocks",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "Atomics", package: "swift-atomics"),
            ],
            swiftSettings: crossModuleOptimization
        ),
        // The Redis side: RedisBroker, RedisPresenceManager, RedisKeptSessionStore, the cluster
        // bus (heartbeats, node directory), the Lua scripts and receipt replication.
        .target(
            name: "RelayCluster",
            dependencies: [
                "RelayCore",
                "RelayLocks",
                "RelayBackends",
                "RelayRedis",
                "RelayStore",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "CoreMetrics", package: "swift-metrics"),
            ],
            swiftSettings: crossModuleOptimization
        ),
        // SwiftNIO server: HTTP, WebSocket, Engine.IO sessions, fan-out, HTTP API.
        .target(
            name: "RelayServer",
            dependencies: [
                "RelayCore",
                "RelayLocks",
                "RelayStore",
                "RelayRedis",
                "RelayBackends",
                "RelayCluster",
                "CZlib",
                "CPrefetch",
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOWebSocket", package: "swift-nio"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "CoreMetrics", package: "swift-metrics"),
                .product(name: "Atomics", package: "swift-atomics"),
                .product(name: "JWTKit", package: "jwt-kit"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "Crypto", package: "swift-crypto"),
            ]
        ),
        .executableTarget(
            name: "relay",
            dependencies: [
                "RelayServer",
                "RelayCore",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        // The load generator: a SwiftNIO Socket.IO/WebSocket client with latency histograms.
        .executableTarget(
            name: "relay-load",
            dependencies: [
                "RelayCore",
                "RelayStore",
                "RelayServer",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOWebSocket", package: "swift-nio"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Histogram", package: "hdrhistogram-swift"),
            ],
            path: "LoadTests/relay-load"
        ),
        .testTarget(name: "RelayCoreTests", dependencies: ["RelayCore", "RelayTestSupport"]),
        // Test helpers shared by test targets (a real redis-server, started and stopped by pid).
        .target(name: "RelayTestSupport", dependencies: ["RelayCore", .product(name: "NIOPosix", package: "swift-nio")], path: "Tests/RelayTestSupport"),
        .testTarget(
            name: "RelayRedisTests",
            dependencies: [
                "RelayRedis",
                "RelayTestSupport",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
            ]
        ),
        .testTarget(
            name: "RelayStoreTests",
            dependencies: [
                "RelayStore",
                "RelayCore",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "GRDB", package: "GRDB.swift"),
            ]
        ),
        .testTarget(
            name: "RelayServerTests",
            dependencies: [
                "RelayServer",
                "RelayBackends",
                "RelayLocks",
                "RelayCluster",
                "RelayTestSupport",
                "RelayRedis",
                "RelayCore",
                "RelayStore",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOEmbedded", package: "swift-nio"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOWebSocket", package: "swift-nio"),
                .product(name: "JWTKit", package: "jwt-kit"),
                .product(name: "Crypto", package: "swift-crypto"),
            ]
        ),
    ]
)
