import Logging
import NIOCore
import NIOEmbedded
import NIOHTTP1
import RelayCore
import XCTest

@testable import RelayServer

/// `ProxyProtocolHandler` on an `EmbeddedChannel`, and the whole HTTP pipeline of
/// `RelayServer.configure` counting connections per real client (PROXY header, X-Forwarded-For).
final class ProxyProtocolHandlerTests: XCTestCase {
    private let trusted = TrustedProxies([try! IPAddressRange(parsing: "127.0.0.1"), try! IPAddressRange(parsing: "10.0.0.0/8")])

    /// A channel with the handler whose `onHeader` records the client; connected from `peer`.
    private func makeChannel(peer: String = "127.0.0.1", timeoutMs: Int64 = 500) throws -> (EmbeddedChannel, () -> [IPAddress]) {
        let channel = EmbeddedChannel()
        let clients = ClientsBox()
        try channel.pipeline.syncOperations.addHandler(ProxyProtocolHandler(
            trusted: trusted, timeout: .milliseconds(timeoutMs), logger: Logger(label: "test")
        ) { _, client in clients.values.append(client) })
        try channel.connect(to: SocketAddress(ipAddress: peer, port: 40000)).wait()
        return (channel, { clients.values })
    }

    private final class ClientsBox { var values: [IPAddress] = [] }

    private func write(_ channel: EmbeddedChannel, _ bytes: [UInt8]) throws {
        var buffer = channel.allocator.buffer(capacity: bytes.count)
        buffer.writeBytes(bytes)
        try channel.writeInbound(buffer)
    }

    private func inbound(_ channel: EmbeddedChannel) throws -> [UInt8] {
        var out: [UInt8] = []
        while let buffer = try channel.readInbound(as: ByteBuffer.self) { out += Array(buffer.readableBytesView) }
        return out
    }

    func testV1HeaderSplitAcrossReads() throws {
        let (channel, clients) = try makeChannel()
        let bytes = Array("PROXY TCP4 198.51.100.7 10.0.0.1 51000 8080\r\nGET / HTTP/1.1\r\n".utf8)
        for chunk in [bytes[0..<3], bytes[3..<20], bytes[20..<44]] {
            try write(channel, Array(chunk))
            XCTAssertEqual(clients(), [])
            XCTAssertTrue(channel.isActive)
        }
        try write(channel, Array(bytes[44...]))
        XCTAssertEqual(clients(), [IPAddress("198.51.100.7")!])
        XCTAssertEqual(String(decoding: try inbound(channel), as: UTF8.self), "GET / HTTP/1.1\r\n", "the bytes after the header go on")
        XCTAssertThrowsError(try channel.pipeline.syncOperations.handler(type: ProxyProtocolHandler.self), "the handler removed itself")
        try write(channel, Array("more".utf8))
        XCTAssertEqual(try inbound(channel), Array("more".utf8))
        channel.embeddedEventLoop.advanceTime(by: .seconds(5))
        XCTAssertTrue(channel.isActive, "no timeout once the header is in")
    }

    func testV2HeaderAndLocalCommand() throws {
        let (channel, clients) = try makeChannel()
        let header = ProxyProtocolHeader(
            version: .v2, command: .proxy,
            source: .init(address: IPAddress("2001:db8::7")!, port: 1), destination: .init(address: IPAddress("2001:db8::1")!, port: 2))
        try write(channel, header.encodedV2()! + Array("x".utf8))
        XCTAssertEqual(clients(), [IPAddress("2001:db8::7")!])
        XCTAssertEqual(try inbound(channel), Array("x".utf8))

        // A health check (LOCAL) speaks for the proxy itself: the peer is the client.
        let (local, localClients) = try makeChannel(peer: "10.1.2.3")
        try write(local, ProxyProtocolHeader(version: .v2, command: .local).encodedV2()!)
        XCTAssertEqual(localClients(), [IPAddress("10.1.2.3")!])
        XCTAssertTrue(local.isActive)
    }

    func testGarbageIsClosed() throws {
        let (channel, clients) = try makeChannel()
        try write(channel, Array("GET / HTTP/1.1\r\n".utf8))
        XCTAssertFalse(channel.isActive)
        XCTAssertEqual(clients(), [])
        XCTAssertEqual(try inbound(channel), [], "nothing reaches the HTTP pipeline")

        let (v1, _) = try makeChannel()
        try write(v1, Array("PROXY TCP4 1.2.3.4 5.6.7.8 1 99999\r\n".utf8))
        XCTAssertFalse(v1.isActive)
    }

    func testUntrustedPeerIsClosedBeforeReading() throws {
        let (channel, clients) = try makeChannel(peer: "203.0.113.9")
        XCTAssertFalse(channel.isActive)
        // Even if bytes were already queued, a forged header is not believed.
        try? write(channel, Array("PROXY TCP4 198.51.100.7 10.0.0.1 51000 8080\r\n".utf8))
        XCTAssertEqual(clients(), [])
    }

    func testNoCompleteHeaderWithinTheTimeoutIsClosed() throws {
        let (channel, clients) = try makeChannel(timeoutMs: 500)
        try write(channel, Array("PROXY TCP4 198.51".utf8))
        channel.embeddedEventLoop.advanceTime(by: .milliseconds(499))
        XCTAssertTrue(channel.isActive)
        channel.embeddedEventLoop.advanceTime(by: .milliseconds(1))
        XCTAssertFalse(channel.isActive)
        XCTAssertEqual(clients(), [])
    }

    // MARK: The HTTP pipeline counts connections per real client

    private func request(_ path: String = "/healthz", forwardedFor: String? = nil, keepAlive: Bool = true) -> [UInt8] {
        var text = "GET \(path) HTTP/1.1\r\nHost: relay\r\n"
        if let forwardedFor { text += "X-Forwarded-For: \(forwardedFor)\r\n" }
        if !keepAlive { text += "Connection: close\r\n" }
        return Array((text + "\r\n").utf8)
    }

    private func responseStatus(_ channel: EmbeddedChannel) throws -> String? {
        channel.embeddedEventLoop.run()
        var out: [UInt8] = []
        while let buffer = try channel.readOutbound(as: ByteBuffer.self) { out += Array(buffer.readableBytesView) }
        let text = String(decoding: out, as: UTF8.self)
        return text.split(separator: "\r\n").first.map(String.init)
    }

    private func httpChannel(_ harness: Harness, peer: String, proxyDeclared: String? = nil) throws -> EmbeddedChannel {
        let channel = EmbeddedChannel(loop: harness.loop)
        try channel.connect(to: SocketAddress(ipAddress: peer, port: 40000)).wait()
        try RelayServer.configure(channel: channel, relay: harness.relay, connectionAddress: proxyDeclared.flatMap { IPAddress($0) })
        return channel
    }

    func testForwardedForFromATrustedProxyRekeysAdmissionPerRequest() throws {
        let harness = Harness { c in
            c.listener.trustedProxies = self.trusted
            c.connections.maxConnectionsPerIP = 1
        }
        let admission = harness.relay.admission
        let proxy = try httpChannel(harness, peer: "127.0.0.1")
        XCTAssertEqual(admission.openConnections, 1)
        XCTAssertEqual(admission.connections(ip: "127.0.0.1"), 0, "a trusted proxy's connection waits for its first request")
        try write(proxy, request(forwardedFor: "198.51.100.1"))
        XCTAssertEqual(try responseStatus(proxy), "HTTP/1.1 200 OK")
        XCTAssertEqual(admission.connections(ip: "198.51.100.1"), 1)
        // The next request on the keep-alive connection is another client's.
        try write(proxy, request(forwardedFor: "6.6.6.6, 198.51.100.2"))
        XCTAssertEqual(try responseStatus(proxy), "HTTP/1.1 200 OK")
        XCTAssertEqual(admission.connections(ip: "198.51.100.1"), 0)
        XCTAssertEqual(admission.connections(ip: "198.51.100.2"), 1)

        // A second connection for the same client is over its cap of 1; another client is not.
        let second = try httpChannel(harness, peer: "127.0.0.1")
        try write(second, request("/socket.io/?EIO=4&transport=websocket", forwardedFor: "198.51.100.2"))
        XCTAssertEqual(try responseStatus(second), "HTTP/1.1 503 Service Unavailable")
        harness.loop.run()
        XCTAssertFalse(second.isActive, "a connection over a limit is not kept alive")
        let third = try httpChannel(harness, peer: "127.0.0.1")
        try write(third, request("/socket.io/?EIO=4&transport=websocket", forwardedFor: "198.51.100.3"))
        XCTAssertEqual(try responseStatus(third), "HTTP/1.1 400 Bad Request", "admitted: only the missing upgrade is wrong")

        // An untrusted peer's header is ignored: it is counted as itself.
        let direct = try httpChannel(harness, peer: "203.0.113.9")
        XCTAssertEqual(admission.connections(ip: "203.0.113.9"), 1)
        try write(direct, request(forwardedFor: "198.51.100.9"))
        XCTAssertEqual(try responseStatus(direct), "HTTP/1.1 200 OK")
        XCTAssertEqual(admission.connections(ip: "198.51.100.9"), 0)
        XCTAssertEqual(admission.connections(ip: "203.0.113.9"), 1)

        for channel in [proxy, third, direct] { try channel.close().wait() }
        harness.loop.run()  // closeFuture callbacks
        XCTAssertEqual(admission.openConnections, 0)
        for ip in ["127.0.0.1", "198.51.100.2", "198.51.100.3", "203.0.113.9"] {
            XCTAssertEqual(admission.connections(ip: ip), 0, ip)
        }
    }

    func testProxyDeclaredClientIsCountedAndItsForwardedForIgnored() throws {
        let harness = Harness { c in c.listener.trustedProxies = self.trusted }
        let admission = harness.relay.admission
        let channel = try httpChannel(harness, peer: "127.0.0.1", proxyDeclared: "198.51.100.7")
        XCTAssertEqual(admission.connections(ip: "198.51.100.7"), 1)
        XCTAssertEqual(admission.connections(ip: "127.0.0.1"), 0)
        try write(channel, request(forwardedFor: "1.1.1.1"))
        XCTAssertEqual(try responseStatus(channel), "HTTP/1.1 200 OK")
        XCTAssertEqual(admission.connections(ip: "1.1.1.1"), 0, "the client itself cannot name another client")
        try channel.close().wait()
        harness.loop.run()  // closeFuture callbacks
        XCTAssertEqual(admission.connections(ip: "198.51.100.7"), 0)
    }
}
