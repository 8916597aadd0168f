import Foundation
import Synchronization

/// Ports on 127.0.0.1 for the servers tests start (redis-server, sentinels): picked free,
/// below the kernel's ephemeral range when there is room, and never handed out twice in a run.
public enum LoopbackPorts {
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
    public static func free(busOffset: Int = 0) throws -> Int {
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
            let ports = busOffset == 0 ? [port] : [port, port + busOffset]
            guard port > 0, ports.allSatisfy(canBind(port:)), handOut(ports) else { continue }
            return port
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
    public static func canBind(port: Int) -> Bool {
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

    public static func canConnect(port: Int) -> Bool {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_addr.s_addr = inet_addr("127.0.0.1")
        addr.sin_port = UInt16(port).bigEndian
        return withUnsafePointer(to: &addr) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) } } == 0
    }
}
