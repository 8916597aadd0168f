import Foundation
import NIOCore
import NIOPosix
import RelayTestSupport
import XCTest

@testable import RelayRedis

/// The client following a master that Redis Sentinel replaces, on 127.0.0.1.
final class RedisSentinelClientTests: XCTestCase {
    typealias Signal = RedisClientTests.Signal

    var group: MultiThreadedEventLoopGroup!

    override func setUp() { group = MultiThreadedEventLoopGroup(numberOfThreads: 1) }
    override func tearDown() { try? group.syncShutdownGracefully() }

    func testFollowsTheMasterSentinelPromotes() async throws {
        let setup = try RedisSentinelProcess()
        defer { setup.kill() }
        try setup.start()

        var options = RedisClient.Options()
        options.initialBackoff = .milliseconds(20)
        options.failoverBackoff = .milliseconds(200)
        let messages = Signal(), links = Signal()
        let client = RedisClient(endpoint: try XCTUnwrap(RedisEndpoint(url: setup.url)), eventLoop: group.next(), options: options)
        client.start(onMessage: { channel, payload in messages.add("\(channel)=\(String(buffer: payload))") }, onLinkChange: { up in links.add(up ? "up" : "down") })
        try await links.wait(count: 1)
        XCTAssertEqual(client.currentTopology, .sentinel)
        _ = try await client.send(["SET", "k", "1"]).get()
        // Replication is asynchronous: wait until the replica has it before the kill.
        let replicas = try await client.send(["WAIT", "1", "5000"]).get().int
        XCTAssertEqual(replicas, 1)
        let channel = "relay:room:{lobby}"
        client.subscribe([channel])
        try await client.subscribed(channel).get()

        let killedAt = Date()
        setup.master.kill()
        try await links.wait(count: 3, timeout: 40)
        XCTAssertEqual(links.all, ["up", "down", "up"])
        print("sentinel failover: the client was up again \(String(format: "%.2f", Date().timeIntervalSince(killedAt))) s after SIGKILL of the master (down-after 1 s)")
        XCTAssertEqual(try setup.currentMasterPort(), setup.replica.port)
        // The promoted replica has what was written before (it replicated it) and takes writes.
        let value = try await client.send(["GET", "k"]).get().string
        XCTAssertEqual(value, "1")
        _ = try await client.send(["SET", "k", "2"]).get()
        try await client.subscribed(channel).get()
        let out = try RedisClusterProcess.cli(["-p", String(setup.replica.port), "SPUBLISH", channel, "after"]).output
        XCTAssertEqual(out.trimmingCharacters(in: .whitespacesAndNewlines), "1")
        try await messages.wait(count: 1)
        XCTAssertEqual(messages.all, ["\(channel)=after"])
        await client.stop()
    }
}
