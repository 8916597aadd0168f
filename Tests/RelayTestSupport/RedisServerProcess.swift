import Foundation
import NIOPosix
import XCTest

/// Shared by the test targets (RelayRedisTests, RelayServerTests).
/// A real `redis-server` on 127.0.0.1, on a free port, started and stopped by the test (by pid).
public final class RedisServerProcess {
    public let port: Int
    private var process: Process?
    private let directory: URL

    public static var binary: String? {
        ["/usr/bin/redis-server", "/usr/local/bin/redis-server"].first { FileManager.default.isExecutableFile(atPath: $0) }
    }

    /// Added to the command line (e.g. cluster mode).
    public var extraArguments: [String] = []

    public init(port: Int? = nil) throws {
        self.port = try port ?? Self.freePort()
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("relay-redis-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    }

    public static func freePort() throws -> Int {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_addr.s_addr = inet_addr("127.0.0.1")
        addr.sin_port = 0
        var len = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafePointer(to: &addr) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, len) } }
        _ = withUnsafeMutablePointer(to: &addr) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &len) } }
        return Int(UInt16(bigEndian: addr.sin_port))
    }

    /// Starts the server and waits (bounded) until it accepts connections.
    public func start() throws {
        guard let binary = Self.binary else {
            throw NSError(domain: "redis", code: 2, userInfo: [NSLocalizedDescriptionKey: "redis-server is not installed"])
        }
        let p = Process()
        p.executableURL = URL(fileURLWithPath: binary)
        p.arguments = ["--port", String(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", directory.path, "--protected-mode", "yes"] + extraArguments
        let pipe = Pipe()
        p.standardOutput = pipe
        p.standardError = FileHandle.nullDevice
        try p.run()
        process = p
        // Wait for redis's own "Ready to accept connections" line (bounded), not a guess.
        let ready = DispatchSemaphore(value: 0)
        let reader = pipe.fileHandleForReading
        Thread.detachNewThread {
            var seen = ""
            while true {
                let data = reader.availableData
                if data.isEmpty { return }
                seen += String(decoding: data, as: UTF8.self)
                if seen.contains("Ready to accept connections") {
                    ready.signal()
                    // Keep draining so redis never blocks on a full pipe.
                    while !reader.availableData.isEmpty {}
                    return
                }
            }
        }
        guard ready.wait(timeout: .now() + 10) == .success else {
            throw NSError(domain: "redis", code: 1, userInfo: [NSLocalizedDescriptionKey: "redis-server did not start on \(port)"])
        }
    }

    public static func canConnect(port: Int) -> Bool {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_addr.s_addr = inet_addr("127.0.0.1")
        addr.sin_port = UInt16(port).bigEndian
        return withUnsafePointer(to: &addr) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) } } == 0
    }

    public var directoryPath: String { directory.path }
    public var isRunning: Bool { process?.isRunning ?? false }

    /// Sends `signal` to the server (SIGSTOP freezes it: a link that stops answering).
    public func signal(_ signal: Int32) {
        guard let p = process, p.isRunning else { return }
        Foundation.kill(p.processIdentifier, signal)
    }

    public func kill() {
        guard let p = process, p.isRunning else { return }
        Foundation.kill(p.processIdentifier, SIGKILL)
        p.waitUntilExit()
        process = nil
    }

    deinit {
        kill()
        try? FileManager.default.removeItem(at: directory)
    }
}

/// Fails (not skips) when redis-server is missing: the test command installs it.
public func requireRedisServer() throws {
    if RedisServerProcess.binary == nil {
        XCTFail("redis-server is not installed: run scripts/test.sh (CI installs Debian's redis-server)")
        throw NSError(domain: "redis", code: 2)
    }
}

/// A started `redis-server` on a free port (fails the test when Debian's redis-server is missing).
public func startedRedisServer() throws -> RedisServerProcess {
    try requireRedisServer()
    let server = try RedisServerProcess()
    try server.start()
    return server
}
