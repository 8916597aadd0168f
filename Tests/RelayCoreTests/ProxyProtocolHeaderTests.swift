import XCTest
@testable import RelayCore

final class ProxyProtocolHeaderTests: XCTestCase {
    private let signature: [UInt8] = [0x0D, 0x0A, 0x0D, 0x0A, 0x00, 0x0D, 0x0A, 0x51, 0x55, 0x49, 0x54, 0x0A]

    private func v2(command: UInt8 = 1, family: UInt8, _ payload: [UInt8]) -> [UInt8] {
        signature + [0x20 | command, family, UInt8(payload.count >> 8), UInt8(payload.count & 0xFF)] + payload
    }

    private func ip(_ s: String) -> IPAddress {
        guard let a = IPAddress(s) else { XCTFail("not an address: \(s)"); return .v4(0) }
        return a
    }

    private func expectError(_ bytes: [UInt8], _ expected: ProxyProtocolError, file: StaticString = #filePath, line: UInt = #line) {
        do {
            let r = try ProxyProtocolHeader.parse(bytes)
            XCTFail("expected \(expected), got \(r)", file: file, line: line)
        } catch {
            XCTAssertEqual(error, expected, file: file, line: line)
        }
    }

    // MARK: v1

    func testV1TCP4() throws {
        let line = Array("PROXY TCP4 192.0.2.1 198.51.100.2 56324 443\r\n".utf8)
        let r = try ProxyProtocolHeader.parse(line + Array("GET / HTTP/1.1\r\n".utf8))
        let header = ProxyProtocolHeader(
            version: .v1, command: .proxy,
            source: .init(address: ip("192.0.2.1"), port: 56324), destination: .init(address: ip("198.51.100.2"), port: 443))
        XCTAssertEqual(r, .header(header, consumed: line.count))
        XCTAssertEqual(header.encodedV1(), line)
    }

    func testV1TCP6AndUnknown() throws {
        let line = Array("PROXY TCP6 2001:db8::1 ::1 1 65535\r\n".utf8)
        guard case .header(let h, let consumed) = try ProxyProtocolHeader.parse(line) else { return XCTFail() }
        XCTAssertEqual(consumed, line.count)
        XCTAssertEqual(h.source, .init(address: ip("2001:db8::1"), port: 1))
        XCTAssertEqual(h.destination?.port, 65535)
        let unknown = Array("PROXY UNKNOWN whatever follows\r\n".utf8)
        XCTAssertEqual(try ProxyProtocolHeader.parse(unknown), .header(ProxyProtocolHeader(version: .v1, command: .proxy), consumed: unknown.count))
    }

    func testV1EveryPrefixNeedsMoreData() throws {
        let line = Array("PROXY TCP4 10.1.2.3 10.0.0.1 4000 8080\r\n".utf8)
        for n in 0..<line.count {
            XCTAssertEqual(try ProxyProtocolHeader.parse(line[0..<n]), .needMoreData, "prefix \(n)")
        }
    }

    func testV1Refusals() {
        expectError(Array("PROXY TCP4 192.0.2.1 198.51.100.2 56324\r\n".utf8), .malformedV1("expected PROXY TCP4 SRC DST SPORT DPORT"))
        expectError(Array("PROXY TCP4 2001:db8::1 192.0.2.1 1 2\r\n".utf8), .malformedV1("not an IPv4 address"))
        expectError(Array("PROXY TCP6 192.0.2.1 ::1 1 2\r\n".utf8), .malformedV1("not an IPv6 address"))
        expectError(Array("PROXY TCP4 192.0.2.1 192.0.2.2 65536 2\r\n".utf8), .malformedV1("not a port (0…65535)"))
        expectError(Array("PROXY TCP4 192.0.2.01 192.0.2.2 1 2\r\n".utf8), .malformedV1("not an IPv4 address"))
        expectError(Array("PROXY TCP4  192.0.2.1 192.0.2.2 1 2\r\n".utf8), .malformedV1("expected PROXY TCP4 SRC DST SPORT DPORT"))
        expectError(Array("PROXY UDP4 192.0.2.1 192.0.2.2 1 2\r\n".utf8), .malformedV1("unknown protocol (TCP4, TCP6 or UNKNOWN)"))
        expectError(Array("PROXY TCP4\n".utf8), .malformedV1("a byte that is not printable ASCII before CRLF"))
        expectError(Array("PROXY TCP4\rX".utf8), .malformedV1("CR not followed by LF"))
        expectError(Array("PROXY ".utf8) + [UInt8](repeating: UInt8(ascii: "a"), count: 101), .headerTooLong)
        expectError(Array("GET / HTTP/1.1\r\n".utf8), .notProxyProtocol)
        expectError(Array("PROXZ".utf8), .notProxyProtocol)
        expectError([0x16, 0x03, 0x01], .notProxyProtocol)  // a TLS ClientHello
    }

    func testV1LongestLineIsAccepted() throws {
        let max = "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff"
        let line = Array("PROXY TCP6 \(max) \(max) 65535 65535\r\n".utf8)
        XCTAssertLessThanOrEqual(line.count, ProxyProtocolHeader.maxV1Bytes)
        guard case .header(_, let consumed) = try ProxyProtocolHeader.parse(line) else { return XCTFail() }
        XCTAssertEqual(consumed, line.count)
    }

    // MARK: v2

    func testV2IPv4WithTLVsAndTrailingData() throws {
        let payload: [UInt8] = [192, 0, 2, 1, 198, 51, 100, 2, 0xDC, 0x04, 0x01, 0xBB] + [0x04, 0x00, 0x02, 0, 0] + [0x20, 0x00, 0x00]
        let bytes = v2(family: 0x11, payload) + Array("GET /".utf8)
        let header = ProxyProtocolHeader(
            version: .v2, command: .proxy,
            source: .init(address: ip("192.0.2.1"), port: 56324), destination: .init(address: ip("198.51.100.2"), port: 443))
        XCTAssertEqual(try ProxyProtocolHeader.parse(bytes), .header(header, consumed: 16 + payload.count))
        for n in 0..<(16 + payload.count) {
            XCTAssertEqual(try ProxyProtocolHeader.parse(bytes[0..<n]), .needMoreData, "prefix \(n)")
        }
        let encoded = try XCTUnwrap(header.encodedV2())
        XCTAssertEqual(try ProxyProtocolHeader.parse(encoded), .header(header, consumed: encoded.count))
    }

    func testV2IPv6() throws {
        let src = ip("2001:db8::7")
        let dst = ip("2001:db8::1")
        let payload = src.bytes + dst.bytes + [0x00, 0x50, 0x1F, 0x90]
        let r = try ProxyProtocolHeader.parse(v2(family: 0x21, payload))
        XCTAssertEqual(r, .header(ProxyProtocolHeader(version: .v2, command: .proxy, source: .init(address: src, port: 80), destination: .init(address: dst, port: 8080)), consumed: 52))
    }

    func testV2LocalUnspecAndUnixCarryNoClient() throws {
        XCTAssertEqual(try ProxyProtocolHeader.parse(v2(command: 0, family: 0x00, [])), .header(ProxyProtocolHeader(version: .v2, command: .local), consumed: 16))
        // LOCAL with an address block: the block is skipped, not believed.
        XCTAssertEqual(try ProxyProtocolHeader.parse(v2(command: 0, family: 0x11, [Int](0..<12).map { UInt8($0) })), .header(ProxyProtocolHeader(version: .v2, command: .local), consumed: 28))
        XCTAssertEqual(try ProxyProtocolHeader.parse(v2(family: 0x00, [])), .header(ProxyProtocolHeader(version: .v2, command: .proxy), consumed: 16))
        XCTAssertEqual(try ProxyProtocolHeader.parse(v2(family: 0x31, [UInt8](repeating: 0, count: 216))), .header(ProxyProtocolHeader(version: .v2, command: .proxy), consumed: 232))
    }

    func testV2Refusals() {
        expectError(signature + [0x11, 0x11, 0, 0], .unsupportedVersion(1))
        expectError(signature + [0x22, 0x11, 0, 0], .unsupportedCommand(2))
        expectError(signature + [0x21, 0x41, 0, 0], .unsupportedFamily(4))
        expectError(signature + [0x21, 0x13, 0, 0], .malformedV2("unknown transport 3"))
        expectError(v2(family: 0x11, [UInt8](repeating: 0, count: 11)), .malformedV2("an IPv4 address block takes 12 bytes"))
        expectError(v2(family: 0x21, [UInt8](repeating: 0, count: 35)), .malformedV2("an IPv6 address block takes 36 bytes"))
        expectError(v2(family: 0x11, [UInt8](repeating: 0, count: 12) + [0x01, 0x00]), .malformedV2("a truncated TLV"))
        expectError(v2(family: 0x11, [UInt8](repeating: 0, count: 12) + [0x01, 0x00, 0x05, 1]), .malformedV2("a TLV longer than the header"))
        // A length over the bound is refused as soon as the fixed part is in.
        expectError(signature + [0x21, 0x11, 0xFF, 0xFF], .headerTooLong)
        expectError(Array(signature[0..<5]) + [0xFF], .notProxyProtocol)
    }

    func testHugeInputIsReadOnlyUpToTheBound() throws {
        let bytes = v2(family: 0x11, [UInt8](repeating: 0, count: 12)) + [UInt8](repeating: 0x41, count: 1_000_000)
        guard case .header(_, let consumed) = try ProxyProtocolHeader.parse(bytes) else { return XCTFail() }
        XCTAssertEqual(consumed, 28)
    }

    func testEncoders() {
        let a = ProxyProtocolHeader.Endpoint(address: ip("192.0.2.1"), port: 1)
        let b = ProxyProtocolHeader.Endpoint(address: ip("::1"), port: 2)
        XCTAssertNil(ProxyProtocolHeader(version: .v1, command: .proxy, source: a, destination: b).encodedV1())
        XCTAssertNil(ProxyProtocolHeader(version: .v1, command: .proxy, source: a, destination: nil).encodedV1())
        XCTAssertNil(ProxyProtocolHeader(version: .v2, command: .local).encodedV1())
        XCTAssertEqual(ProxyProtocolHeader(version: .v1, command: .proxy).encodedV1(), Array("PROXY UNKNOWN\r\n".utf8))
        XCTAssertEqual(ProxyProtocolHeader(version: .v2, command: .local).encodedV2(), signature + [0x20, 0, 0, 0])
        XCTAssertNil(ProxyProtocolHeader(version: .v2, command: .proxy, source: a, destination: b).encodedV2())
    }
}
