import Foundation
import XCTest

/// A real Redis Cluster on 127.0.0.1: `masters` masters with one replica each, made by
/// `redis-cli --cluster create`, started and stopped by the test (by pid).
public final class RedisClusterProcess {
    public let nodes: [RedisServerProcess]

    public init(masters: Int = 3, nodeTimeoutMs: Int = 1_000) throws {
        try requireRedisServer()
        nodes = try (0..<(masters * 2)).map { _ in
            let node = try RedisServerProcess(busOffset: 10_000)
            node.extraArguments = [
                "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
                "--cluster-node-timeout", String(nodeTimeoutMs),
                // A replica takes over however long its link to the master was down.
                "--cluster-replica-validity-factor", "0",
            ]
            return node
        }
    }

    public var seeds: String { nodes.map { "127.0.0.1:\($0.port)" }.joined(separator: ",") }

    /// Starts the nodes, creates the cluster and waits (bounded) until every node says it is ok.
    public func start() throws {
        for node in nodes { try node.start() }
        let create = try Self.cli(["--cluster", "create"] + nodes.map { "127.0.0.1:\($0.port)" } + ["--cluster-replicas", "1", "--cluster-yes"])
        guard create.status == 0 else { throw NSError(domain: "redis", code: 3, userInfo: [NSLocalizedDescriptionKey: "cluster create failed: \(create.output)"]) }
        try waitUntil(timeout: 30, "cluster_state:ok on every node") {
            try self.nodes.allSatisfy { try Self.cli(["-p", String($0.port), "CLUSTER", "INFO"]).output.contains("cluster_state:ok") }
        }
    }

    /// The node that serves `key`'s slot now, as its master.
    public func master(of key: String) throws -> RedisServerProcess? {
        guard let asked = nodes.first(where: \.isRunning) else { return nil }
        let slot = try Self.cli(["-p", String(asked.port), "CLUSTER", "KEYSLOT", key]).output.trimmingCharacters(in: .whitespacesAndNewlines)
        guard let slot = Int(slot) else { return nil }
        for node in nodes where node.isRunning {
            // `<id> <ip:port@cport> <flags> <master> <ping> <pong> <epoch> <link> <slot ranges>…`
            let out = try Self.cli(["-p", String(node.port), "CLUSTER", "NODES"]).output
            for line in out.split(separator: "\n") {
                let fields = line.split(separator: " ")
                guard fields.count > 8, fields[2].contains("master"), !fields[2].contains("fail"),
                    let port = fields[1].split(separator: "@").first?.split(separator: ":").last.flatMap({ Int($0) })
                else { continue }
                for range in fields[8...] {
                    let bounds = range.split(separator: "-").compactMap { Int($0) }
                    guard let low = bounds.first, let high = bounds.last else { continue }
                    if (low...high).contains(slot) { return nodes.first { $0.port == port } }
                }
            }
            return nil
        }
        return nil
    }

    public func waitUntil(timeout: Double, _ what: String, _ condition: () throws -> Bool) throws {
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            if (try? condition()) == true { return }
            usleep(50_000)
        }
        throw NSError(domain: "redis", code: 4, userInfo: [NSLocalizedDescriptionKey: "waited \(timeout) s for \(what)"])
    }

    @discardableResult
    public static func cli(_ args: [String]) throws -> (status: Int32, output: String) {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/usr/bin/redis-cli")
        p.arguments = args
        let pipe = Pipe()
        p.standardOutput = pipe
        p.standardError = pipe
        try p.run()
        let data = pipe.fileHandleForReading.readDataToEndOfFile()
        p.waitUntilExit()
        return (p.terminationStatus, String(decoding: data, as: UTF8.self))
    }

    public func kill() {
        for node in nodes { node.kill() }
    }
}
