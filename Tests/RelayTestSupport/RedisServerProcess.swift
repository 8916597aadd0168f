import Foundation
import NIOPosix
import XCTest

/// Shared by the test targets (RelayRedisTests, RelayServerTests).
/// A real `redis-server` on 127.0.0.1, on a free port, started and stopped by the test (by pid).
public final class RedisServerProcess {
    public private(set) var port: Int
    private var process: Process?
    private let directory: URL

    public static var binary: String? {
        ["/usr/bin/redis-server", "/usr/local/bin/redis-server"].first { FileManager.default.isExecutableFile(atPath: $0) }
    }

    /// Added to the command line (e.g. cluster mode).
    public var extraArguments: [String] = []

    /// `port` fixes the port (a restart on the same one); without it the port is picked, and picked
    /// again if redis cannot bind it. `busOffset` keeps `port + busOffset` free too (a cluster node's bus).
    public init(port: Int? = nil, busOffset: Int = 0) throws {
        picksItsPort = port == nil
        self.busOffset = busOffset
        self.port = try port ?? LoopbackPorts.free(busOffset: busOffset)
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("relay-redis-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    }

    private let picksItsPort: Bool
    private let busOffset: Int

    /// Starts the server and waits (bounded) until it accepts connections. When redis exits before
    /// that (its port was taken meanwhile) and the port was picked here, it is picked again: a few tries.
    public func start() throws {
        var tries = 0
        while true {
            tries += 1
            switch try launch() {
            case .ready: return
            case .exited(let output) where picksItsPort && tries < 5:
                FileHandle.standardError.write(Data("redis-server could not start on \(port), picking another port: \(Self.lastLines(output))\n".utf8))
                port = try LoopbackPorts.free(busOffset: busOffset)
            case .exited(let output):
                throw NSError(domain: "redis", code: 1, userInfo: [NSLocalizedDescriptionKey: "redis-server did not start on \(port): \(Self.lastLines(output))"])
            case .silent:
                throw NSError(domain: "redis", code: 1, userInfo: [NSLocalizedDescriptionKey: "redis-server did not start on \(port) within 10 s"])
            }
        }
    }

    /// Redis's last words (why it exited), on one line.
    private static func lastLines(_ output: String) -> String {
        output.split(separator: "\n").suffix(3).joined(separator: " | ")
    }

    private enum Launch { case ready, exited(String), silent }

    private func launch() throws -> Launch {
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
        // Wait for redis's own "Ready to accept connections" line (bounded), not a guess; an end of
        // its output before that line means it exited (e.g. "Address already in use").
        let outcome = LaunchOutcome()
        let reader = pipe.fileHandleForReading
        Thread.detachNewThread {
            var seen = ""
            while true {
                let data = reader.availableData
                if data.isEmpty { return outcome.finish(ready: false, output: seen) }
                seen += String(decoding: data, as: UTF8.self)
                if seen.contains("Ready to accept connections") {
                    outcome.finish(ready: true, output: seen)
                    // Keep draining so redis never blocks on a full pipe.
                    while !reader.availableData.isEmpty {}
                    return
                }
            }
        }
        guard outcome.done.wait(timeout: .now() + 10) == .success else { return .silent }
        if outcome.ready { return .ready }
        p.waitUntilExit()
        process = nil
        return .exited(outcome.output)
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

/// What the thread reading redis's output saw: written once by it, read after `done` is signalled
/// (the semaphore orders the write before the read).
private final class LaunchOutcome: @unchecked Sendable {
    let done = DispatchSemaphore(value: 0)
    private(set) var ready = false
    private(set) var output = ""

    func finish(ready: Bool, output: String) {
        self.ready = ready
        self.output = output
        done.signal()
    }
}
