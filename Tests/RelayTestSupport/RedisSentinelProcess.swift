import Foundation
import XCTest

/// A master, one replica and three Redis Sentinels watching it as `relay`, on 127.0.0.1,
/// started and stopped by the test (by pid).
public final class RedisSentinelProcess {
    public let master: RedisServerProcess
    public let replica: RedisServerProcess
    public let sentinelPorts: [Int]
    private var sentinels: [Process] = []
    private let directory: URL

    public static var binary: String? {
        ["/usr/bin/redis-sentinel", "/usr/local/bin/redis-sentinel"].first { FileManager.default.isExecutableFile(atPath: $0) }
    }

    public init(downAfterMs: Int = 1_000) throws {
        try requireRedisServer()
        guard Self.binary != nil else {
            XCTFail("redis-sentinel is not installed: run scripts/test.sh (CI installs Debian's redis-sentinel)")
            throw NSError(domain: "redis", code: 6)
        }
        master = try RedisServerProcess()
        replica = try RedisServerProcess()
        sentinelPorts = try (0..<3).map { _ in try LoopbackPorts.free() }
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("relay-sentinel-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        self.downAfterMs = downAfterMs
    }

    private let downAfterMs: Int

    public var url: String { "redis+sentinel://" + sentinelPorts.map { "127.0.0.1:\($0)" }.joined(separator: ",") + "/relay" }

    public func start() throws {
        try master.start()
        // Set here, not at init: the master's port is final once it has started.
        replica.extraArguments = ["--replicaof", "127.0.0.1", String(master.port)]
        try replica.start()
        for port in sentinelPorts {
            // Sentinel rewrites its file: each gets its own.
            let file = directory.appendingPathComponent("sentinel-\(port).conf")
            try """
                port \(port)
                bind 127.0.0.1
                dir \(directory.path)
                sentinel monitor relay 127.0.0.1 \(master.port) 2
                sentinel down-after-milliseconds relay \(downAfterMs)
                sentinel failover-timeout relay 5000
                sentinel parallel-syncs relay 1

                """.write(to: file, atomically: true, encoding: .utf8)
            let p = Process()
            p.executableURL = URL(fileURLWithPath: Self.binary ?? "/usr/bin/redis-sentinel")
            p.arguments = [file.path]
            p.standardOutput = FileHandle.nullDevice
            p.standardError = FileHandle.nullDevice
            try p.run()
            sentinels.append(p)
        }
        // Bounded: every sentinel answers for the master and knows the replica.
        try waitUntil(timeout: 20, "sentinels watching the master and its replica") {
            try self.sentinelPorts.allSatisfy { port in
                let out = try RedisClusterProcess.cli(["-p", String(port), "SENTINEL", "replicas", "relay"]).output
                return out.contains(String(self.replica.port))
            }
        }
    }

    /// The master the sentinels name now.
    public func currentMasterPort() throws -> Int? {
        let out = try RedisClusterProcess.cli(["-p", String(sentinelPorts[0]), "SENTINEL", "get-master-addr-by-name", "relay"]).output
        return out.split(separator: "\n").last.flatMap { Int($0.trimmingCharacters(in: .whitespaces)) }
    }

    public func waitUntil(timeout: Double, _ what: String, _ condition: () throws -> Bool) throws {
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            if (try? condition()) == true { return }
            usleep(50_000)
        }
        throw NSError(domain: "redis", code: 4, userInfo: [NSLocalizedDescriptionKey: "waited \(timeout) s for \(what)"])
    }

    public func kill() {
        for p in sentinels where p.isRunning {
            Foundation.kill(p.processIdentifier, SIGKILL)
            p.waitUntilExit()
        }
        sentinels = []
        master.kill()
        replica.kill()
    }

    deinit {
        kill()
        try? FileManager.default.removeItem(at: directory)
    }
}
