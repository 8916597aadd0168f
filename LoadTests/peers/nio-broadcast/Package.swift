// swift-tools-version: 6.0
// The floor under Relay's per-event cost: a plain SwiftNIO WebSocket room broadcast with the
// same wire protocol as ws-broadcast.js and the uWebSockets peer ({"join":R}, then every text
// frame goes to the room's other members), NIO's own HTTP upgrader and frame codec, nothing
// else. Not part of Relay's build or CI; see docs/BENCHMARKS.md ("The NIO floor").
import PackageDescription

let package = Package(
    name: "nio-broadcast",
    dependencies: [.package(url: "https://github.com/apple/swift-nio.git", from: "2.80.0")],
    targets: [
        .executableTarget(
            name: "nio-broadcast",
            dependencies: [
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOWebSocket", package: "swift-nio"),
            ])
    ])
