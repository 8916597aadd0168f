import Foundation
import NIOPosix
import Synchronization
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
        self.port = try port ?? Self.freePort(busOffset: busOffset)
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("relay-redis-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    }

    private let picksItsPort: Bool
    private let busOffset: Int

    /// The kernel's ephemeral ports (the local ports of outgoing connections), read once.
    static let ephemeralPorts: ClosedRange<Int> = {
        let text = (try? String(contentsOfFile: "/proc/sys/net/ipv4/ip_local_port_range", encoding: .utf8)) ?? ""
        let bounds = text.split(whereSeparator: \.isWhitespace).compactMap { Int($0) }
        guard bounds.count == 2, bounds[0] <= bounds[1] else { return 32_768...60_999 }
        return bounds[0]...bounds[1]
    }()

    /// A port free to bind now, with `port + busOffset` free too when `busOffset > 0`.
    /// Picked below the ephemeral range when there is room: there no outgoing connection of this
    /// or another test can take it between this check and redis's bind (CI saw that once).
    public static func freePort(busOffset: Int = 0) throws -> Int {
        let low = 10_000
        let high = ephemeralPorts.lowerBound - 1 - busOffset
        if high - low >= 1_000 {
            for _ in 0..<500 {
                let port = Int.random(in: low...high)
                let ports = busOffset == 0 ? [port] : [port, port + busOffset]
                guard ports.allSatisfy(canBind(port:)), handOut(ports) else { continue }
                return port
            }
        }
        // No room below the ephemeral range: let the kernel pick (the start retries if redis cannot bind).
        for _ in 0..<200 {
            let port = kernelPickedPort()
            if port > 0, busOffset == 0 || (port + busOffset <= 65_535 && canBind(port: port + busOffset)) { return port }
        }
        throw NSError(domain: "redis", code: 5, userInfo: [NSLocalizedDescriptionKey: "no free port (bus offset \(busOffset))"])
    }

    /// Ports handed out in this run: never twice, since a cluster picks six nodes' ports (and their
    /// bus ports) before it starts any, so none is bound yet when the next is picked.
    private static let handedOut = Mutex<Set<Int>>([])

    private static func handOut(_ ports: [Int]) -> Bool {
        handedOut.withLock { taken in
            guard ports.allSatisfy({ !taken.contains($0) }) else { return false }
            taken.formUnion(ports)
            return true
        }
    }

    private static func kernelPickedPort() -> Int {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { return 0 }
        defer { close(fd) }
        var addr = loopback(port: 0)
        var len = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafePointer(to: &addr) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, len) } }
        guard bound == 0 else { return 0 }
        _ = withUnsafeMutablePointer(to: &addr) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &len) } }
        return Int(UInt16(bigEndian: addr.sin_port))
    }

    /// Whether a listener could bind `port` on 127.0.0.1 now (with SO_REUSEADDR, as redis binds).
    static func canBind(port: Int) -> Bool {
        guard (1...65_535).contains(port) else { return false }
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        var one: Int32 = 1
        _ = setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
        var addr = loopback(port: port)
        return withUnsafePointer(to: &addr) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) } } == 0
    }

    private static func loopback(port: Int) -> sockaddr_in {
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_addr.s_addr = inet_addr("127.0.0.1")
        addr.sin_port = UInt16(clamping: port).bigEndian
        return addr
    }

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
                port = try Self.freePort(busOffset: busOffset)
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
