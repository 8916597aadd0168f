import Foundation
import RelayTestSupport
import XCTest

/// The harness that starts real redis-servers: a port taken between its pick and redis's bind
/// (CI saw one once, failing a cluster test) is picked again, not a 10-s wait and a failure.
final class RedisServerProcessTests: XCTestCase {
    func testAPortTakenBeforeTheStartIsPickedAgain() throws {
        try requireRedisServer()
        let redis = try RedisServerProcess(busOffset: 10_000)
        let taken = redis.port
        let squatter = try Listener(port: taken)
        try redis.start()
        XCTAssertNotEqual(redis.port, taken)
        XCTAssertTrue(LoopbackPorts.canConnect(port: redis.port))
        XCTAssertEqual(try RedisClusterProcess.cli(["-p", String(redis.port), "PING"]).output.trimmingCharacters(in: .whitespacesAndNewlines), "PONG")
        redis.kill()
        squatter.close()
    }

    func testAFixedPortThatIsTakenFailsWithRedisOwnReason() throws {
        try requireRedisServer()
        let port = try LoopbackPorts.free()
        let squatter = try Listener(port: port)
        let redis = try RedisServerProcess(port: port)
        XCTAssertThrowsError(try redis.start()) { error in
            XCTAssertTrue("\(error)".contains("did not start on \(port)"), "\(error)")
            XCTAssertTrue("\(error)".lowercased().contains("address already in use"), "\(error)")
        }
        XCTAssertFalse(redis.isRunning)
        squatter.close()
    }

    func testPickedPortsAreNeverHandedOutTwice() throws {
        let ports = try (0..<50).map { _ in try LoopbackPorts.free(busOffset: 10_000) }
        let all = ports + ports.map { $0 + 10_000 }
        XCTAssertEqual(Set(all).count, all.count)
    }

    /// A plain listening socket on 127.0.0.1 (no SO_REUSEADDR), closed by the test.
    final class Listener {
        let fd: Int32
        init(port: Int) throws {
            fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            var addr = sockaddr_in()
            addr.sin_family = sa_family_t(AF_INET)
            addr.sin_addr.s_addr = inet_addr("127.0.0.1")
            addr.sin_port = UInt16(clamping: port).bigEndian
            let bound = withUnsafePointer(to: &addr) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) } }
            guard bound == 0, listen(fd, 8) == 0 else {
                Foundation.close(fd)
                throw NSError(domain: "listener", code: 1, userInfo: [NSLocalizedDescriptionKey: "could not listen on \(port)"])
            }
        }
        func close() { Foundation.close(fd) }
    }
}
