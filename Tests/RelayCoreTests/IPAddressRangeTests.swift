import XCTest
@testable import RelayCore

final class IPAddressRangeTests: XCTestCase {
    private func ip(_ s: String) -> IPAddress {
        guard let a = IPAddress(s) else { XCTFail("not an address: \(s)"); return .v4(0) }
        return a
    }

    private func range(_ s: String) -> IPAddressRange {
        do { return try IPAddressRange(parsing: s) } catch {
            XCTFail("\(error)")
            return try! IPAddressRange(parsing: "0.0.0.0/0")  // unreachable after XCTFail
        }
    }

    func testIPv4Parsing() {
        XCTAssertEqual(IPAddress("192.0.2.1"), .v4(0xC000_0201))
        XCTAssertEqual(IPAddress("0.0.0.0"), .v4(0))
        XCTAssertEqual(IPAddress("255.255.255.255"), .v4(.max))
        for bad in ["", "1.2.3", "1.2.3.4.5", "256.0.0.1", "01.2.3.4", "1..2.3", "1.2.3.4 ", "a.b.c.d", "1.2.3.-4", "1.2.3.4/8"] {
            XCTAssertNil(IPAddress(bad), bad)
        }
    }

    func testIPv6ParsingAndCanonicalText() {
        let cases: [(String, String)] = [
            ("::", "::"), ("::1", "::1"), ("2001:DB8::1", "2001:db8::1"),
            ("2001:0db8:0000:0000:0000:0000:0000:0001", "2001:db8::1"),
            ("2001:db8:0:0:1:0:0:1", "2001:db8::1:0:0:1"), ("1:0:0:2:0:0:0:3", "1:0:0:2::3"),
            ("1:2:3:4:5:6:7:8", "1:2:3:4:5:6:7:8"), ("1::", "1::"), ("1:0:2:3:4:5:6:7", "1:0:2:3:4:5:6:7"),
            ("::ffff:192.0.2.1", "::ffff:192.0.2.1"), ("::FFFF:c000:201", "::ffff:192.0.2.1"), ("64:ff9b::1.2.3.4", "64:ff9b::102:304"),
        ]
        for (text, canonical) in cases {
            guard let a = IPAddress(text) else { XCTFail(text); continue }
            XCTAssertEqual(a.description, canonical, text)
            XCTAssertEqual(IPAddress(canonical), a)
        }
        for bad in [":", ":::", "1:::2", "1::2::3", "1:2:3:4:5:6:7:8:9", "1:2:3:4:5:6:7", "12345::", "::g", "fe80::1%eth0", "[::1]", "1:2:3:4:5:6:7::8:9", ":1::", "1::2:"] {
            XCTAssertNil(IPAddress(bad), bad)
        }
        XCTAssertEqual(IPAddress("::ffff:10.0.0.1")?.unmapped, IPAddress("10.0.0.1"))
        XCTAssertEqual(IPAddress("::1")?.unmapped, IPAddress("::1"))
    }

    func testRanges() {
        XCTAssertTrue(range("10.0.0.0/8").contains(ip("10.255.0.1")))
        XCTAssertFalse(range("10.0.0.0/8").contains(ip("11.0.0.1")))
        XCTAssertTrue(range("10.0.0.0/8").contains(ip("::ffff:10.1.2.3")), "IPv4-mapped clients match IPv4 blocks")
        XCTAssertTrue(range("127.0.0.1").contains(ip("127.0.0.1")))
        XCTAssertFalse(range("127.0.0.1").contains(ip("127.0.0.2")))
        XCTAssertTrue(range("0.0.0.0/0").contains(ip("203.0.113.9")))
        XCTAssertFalse(range("0.0.0.0/0").contains(ip("::1")))
        XCTAssertTrue(range("fd00::/8").contains(ip("fd12:3456::1")))
        XCTAssertFalse(range("fd00::/8").contains(ip("fe80::1")))
        XCTAssertTrue(range("2001:db8::/127").contains(ip("2001:db8::1")))
        XCTAssertFalse(range("2001:db8::/127").contains(ip("2001:db8::2")))
        XCTAssertTrue(range("::/0").contains(ip("::1")))
        XCTAssertEqual(range("10.0.0.0/8").description, "10.0.0.0/8")
        XCTAssertEqual(range(" 192.0.2.7 ").description, "192.0.2.7")
        XCTAssertEqual(range("::ffff:10.0.0.0/8").description, "10.0.0.0/8")
    }

    func testRangeErrorsSayWhatIsWrong() {
        func reason(_ s: String) -> String {
            do { _ = try IPAddressRange(parsing: s); return "accepted" } catch { return error.reason }
        }
        XCTAssertEqual(reason("10.1.2.3/8"), "host bits are set; did you mean 10.0.0.0/8?")
        XCTAssertEqual(reason("10.0.0.0/33"), "the prefix length must be 0…32 for an IPv4 address")
        XCTAssertEqual(reason("::/129"), "the prefix length must be 0…128 for an IPv6 address")
        XCTAssertEqual(reason("10.0.0.0/"), "the prefix length must be 0…32 for an IPv4 address")
        XCTAssertEqual(reason("10.0.0.0/+8"), "the prefix length must be 0…32 for an IPv4 address")
        XCTAssertTrue(reason("haproxy").hasPrefix("not an IPv4 or IPv6 address"))
        XCTAssertTrue(reason("").hasPrefix("not an IPv4 or IPv6 address"))
    }

    // MARK: X-Forwarded-For

    private let trusted = TrustedProxies([
        try! IPAddressRange(parsing: "10.0.0.0/8"), try! IPAddressRange(parsing: "127.0.0.1"),
    ])

    func testForwardedForFromAnUntrustedPeerIsIgnored() {
        XCTAssertEqual(trusted.clientAddress(peer: ip("203.0.113.5"), forwardedFor: ["198.51.100.1"]), ip("203.0.113.5"))
        XCTAssertEqual(TrustedProxies().clientAddress(peer: ip("127.0.0.1"), forwardedFor: ["198.51.100.1"]), ip("127.0.0.1"))
    }

    func testRightMostUntrustedAddressWins() {
        // The client wrote a fake left-most entry; the proxies appended the real one.
        XCTAssertEqual(trusted.clientAddress(peer: ip("127.0.0.1"), forwardedFor: ["6.6.6.6, 198.51.100.1, 10.0.0.2"]), ip("198.51.100.1"))
        XCTAssertEqual(trusted.clientAddress(peer: ip("127.0.0.1"), forwardedFor: ["6.6.6.6", "198.51.100.1,10.0.0.2"]), ip("198.51.100.1"))
        XCTAssertEqual(trusted.clientAddress(peer: ip("::ffff:127.0.0.1"), forwardedFor: ["2001:db8::7"]), ip("2001:db8::7"))
        XCTAssertEqual(trusted.clientAddress(peer: ip("127.0.0.1"), forwardedFor: ["[2001:db8::7]:4711"]), ip("2001:db8::7"))
        XCTAssertEqual(trusted.clientAddress(peer: ip("127.0.0.1"), forwardedFor: ["198.51.100.1:4711"]), ip("198.51.100.1"))
        // Every hop trusted: the left-most one.
        XCTAssertEqual(trusted.clientAddress(peer: ip("127.0.0.1"), forwardedFor: ["10.0.0.3, 10.0.0.2"]), ip("10.0.0.3"))
    }

    func testInvalidOrMissingHeaderMeansThePeer() {
        let peer = ip("10.0.0.9")
        XCTAssertEqual(trusted.clientAddress(peer: peer, forwardedFor: []), peer)
        XCTAssertEqual(trusted.clientAddress(peer: peer, forwardedFor: [""]), peer)
        XCTAssertEqual(trusted.clientAddress(peer: peer, forwardedFor: ["unknown"]), peer)
        XCTAssertEqual(trusted.clientAddress(peer: peer, forwardedFor: ["198.51.100.1,"]), peer)
        XCTAssertEqual(trusted.clientAddress(peer: peer, forwardedFor: ["198.51.100.1, garbage"]), peer)
        XCTAssertEqual(trusted.clientAddress(peer: peer, forwardedFor: ["1.2.3.4:99999"]), peer)
        // Garbage left of the first untrusted entry is never looked at.
        XCTAssertEqual(trusted.clientAddress(peer: peer, forwardedFor: ["garbage, 198.51.100.1"]), ip("198.51.100.1"))
        let long = Array(repeating: "10.0.0.1", count: TrustedProxies.maxForwardedHops + 1).joined(separator: ",")
        XCTAssertEqual(trusted.clientAddress(peer: peer, forwardedFor: [long]), peer)
    }
}
