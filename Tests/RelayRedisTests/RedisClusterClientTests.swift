import Foundation
import NIOCore
import NIOPosix
import RelayTestSupport
import XCTest

@testable import RelayRedis

/// The client against a real Redis Cluster of 3 masters and 3 replicas on 127.0.0.1.
final class RedisClusterClientTests: XCTestCase {
    typealias Signal = RedisClientTests.Signal
    var group: MultiThreadedEventLoopGroup!
    var cluster: RedisClusterProcess!

    override func setUpWithError() throws {
        group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        cluster = try RedisClusterProcess()
        try cluster.start()
    }

    override func tearDown() {
        cluster?.kill()
        try? group.syncShutdownGracefully()
    }

    func startClient(seeds: String, messages: Signal = Signal(), links: Signal = Signal()) throws -> RedisClient {
        var options = RedisClient.Options()
        options.initialBackoff = .milliseconds(20)
        options.failoverBackoff = .milliseconds(200)
        let endpoint = try XCTUnwrap(RedisEndpoint(url: "redis://\(seeds)"))
        let client = RedisClient(endpoint: endpoint, eventLoop: group.next(), options: options)
        client.start(onMessage: { channel, payload in messages.add("\(channel)=\(String(buffer: payload))") }, onLinkChange: { up in links.add(up ? "up" : "down") })
        return client
    }

    func testOneSeedFindsTheClusterAndCommandsReachEachSlotsMaster() async throws {
        let links = Signal()
        // One seed, a replica's port among them: the client reads the slot map and links to the masters.
        let client = try startClient(seeds: "127.0.0.1:\(cluster.nodes[4].port)", links: links)
        try await links.wait(count: 1)
        XCTAssertEqual(links.all, ["up"])
        XCTAssertEqual(client.currentTopology, .cluster)
        let keys = (0..<200).map { "k\($0)" }
        for key in keys { _ = try await client.send(["SET", key, "v-\(key)"]).get() }
        for key in keys {
            let value = try await client.send(["GET", key]).get().string
            XCTAssertEqual(value, "v-\(key)")
        }
        let owners = Set(try keys.map { try XCTUnwrap(cluster.master(of: $0)).port })
        XCTAssertEqual(owners.count, 3, "the keys spread over the three masters")
        // A script's keys share a tag, so one slot: it runs on that slot's master.
        let reply = try await client.send(["EVAL", "redis.call('SET', KEYS[1], ARGV[1]); return redis.call('INCR', KEYS[2])", "2", "a:{t}", "b:{t}", "x"]).get()
        XCTAssertEqual(reply.int, 1)
        await client.stop()
    }

    func testShardedSubscriptionsOnEveryMaster() async throws {
        let messages = Signal()
        let links = Signal()
        let subscriber = try startClient(seeds: cluster.seeds, messages: messages, links: links)
        try await links.wait(count: 1)
        let channels = (0..<30).map { "relay:room:{r\($0)}" }
        subscriber.subscribe(channels)
        for channel in channels { try await subscriber.subscribed(channel).get() }
        let publisherLinks = Signal()
        let publisher = try startClient(seeds: "127.0.0.1:\(cluster.nodes[0].port)", links: publisherLinks)
        try await publisherLinks.wait(count: 1)
        for channel in channels {
            let receivers = try await publisher.publish(channel, ByteBuffer(string: "hi")).get().int
            XCTAssertEqual(receivers, 1, channel)
        }
        try await messages.wait(count: 30)
        XCTAssertEqual(Set(messages.all), Set(channels.map { "\($0)=hi" }))
        await publisher.stop()
        await subscriber.stop()
    }

    /// A master killed with SIGKILL: its replica is promoted, the client notices, links to it,
    /// subscribes there again and serves the slot; the time it took is printed.
    func testMasterKilledIsReplacedByItsReplica() async throws {
        let messages = Signal()
        let links = Signal()
        let client = try startClient(seeds: cluster.seeds, messages: messages, links: links)
        try await links.wait(count: 1)
        let channel = "relay:room:{failover}"
        client.subscribe([channel])
        try await client.subscribed(channel).get()
        let victim = try XCTUnwrap(cluster.master(of: channel))
        let killedAt = Date()
        victim.kill()
        try await links.wait(count: 3, timeout: 30)
        let back = Date().timeIntervalSince(killedAt)
        // During the failover the link may go down once more (a node the client retried was
        // still electing): what must hold is down then up again, alternating, ending up.
        XCTAssertEqual(Array(links.all.prefix(3)), ["up", "down", "up"])
        try cluster.waitUntil(timeout: 10, "the link settled up") { client.isUp && links.all.last == "up" }
        XCTAssertEqual(zip(links.all, links.all.dropFirst()).filter { $0 == $1 }.count, 0, "\(links.all)")
        print("cluster failover: the client was up again \(String(format: "%.2f", back)) s after SIGKILL of the master (node timeout 1 s)")
        try await client.subscribed(channel).get()
        // Every node learns of the promotion by gossip: wait until the one asked knows.
        try cluster.waitUntil(timeout: 10, "the promotion known") { try self.cluster.master(of: channel).map { $0.port != victim.port } ?? false }
        let newMaster = try XCTUnwrap(cluster.master(of: channel))
        let publisher = try startClient(seeds: "127.0.0.1:\(newMaster.port)")
        try cluster.waitUntil(timeout: 10, "publisher up") { publisher.isUp }
        let receivers = try await publisher.publish(channel, ByteBuffer(string: "after")).get().int
        XCTAssertEqual(receivers, 1)
        try await messages.wait(count: 1)
        XCTAssertEqual(messages.all, ["\(channel)=after"])
        _ = try await client.send(["SET", "{failover}:k", "1"]).get()
        let value = try await client.send(["GET", "{failover}:k"]).get().string
        XCTAssertEqual(value, "1")
        await publisher.stop()
        await client.stop()
    }

    /// A slot migrated to another master: mid-migration commands follow `ASK`, after it `MOVED`;
    /// the subscription the old master dropped is made again on the new one.
    func testMovedSlotIsFollowedAndItsSubscriptionMoves() async throws {
        let messages = Signal()
        let links = Signal()
        let client = try startClient(seeds: cluster.seeds, messages: messages, links: links)
        try await links.wait(count: 1)
        let key = "{moving}:k"
        let channel = "relay:room:{moving}"
        _ = try await client.send(["SET", key, "before"]).get()
        client.subscribe([channel])
        try await client.subscribed(channel).get()

        let source = try XCTUnwrap(cluster.master(of: key))
        let masters = Set(try (0..<200).map { try XCTUnwrap(cluster.master(of: "k\($0)")).port })
        let target = try XCTUnwrap(cluster.nodes.first { masters.contains($0.port) && $0.port != source.port })
        func cli(_ node: RedisServerProcess, _ args: String...) throws -> String {
            try RedisClusterProcess.cli(["-p", String(node.port)] + args).output.trimmingCharacters(in: .whitespacesAndNewlines)
        }
        let slot = try cli(source, "CLUSTER", "KEYSLOT", key)
        let sourceID = try cli(source, "CLUSTER", "MYID"), targetID = try cli(target, "CLUSTER", "MYID")
        _ = try cli(target, "CLUSTER", "SETSLOT", slot, "IMPORTING", sourceID)
        _ = try cli(source, "CLUSTER", "SETSLOT", slot, "MIGRATING", targetID)
        _ = try cli(source, "MIGRATE", "127.0.0.1", String(target.port), "", "0", "5000", "KEYS", key)
        // Mid-migration the source answers ASK for a key it no longer has: asked with ASKING.
        let asked = try await client.send(["GET", key]).get().string
        XCTAssertEqual(asked, "before")
        for node in cluster.nodes { _ = try cli(node, "CLUSTER", "SETSLOT", slot, "NODE", targetID) }

        let value = try await client.send(["GET", key]).get().string
        XCTAssertEqual(value, "before")
        try cluster.waitUntil(timeout: 10, "the subscription made again on the new master") {
            try cli(target, "PUBSUB", "SHARDNUMSUB", channel).hasSuffix("1")
        }
        XCTAssertEqual(try cli(target, "SPUBLISH", channel, "moved"), "1")
        try await messages.wait(count: 1)
        XCTAssertEqual(messages.all, ["\(channel)=moved"])
        XCTAssertEqual(links.all, ["up"], "a moved slot is not an outage")
        await client.stop()
    }
}
