import RelayTestSupport
import NIOCore
import XCTest

@testable import RelayRedis

/// The pure parts of cluster and Sentinel support: endpoint forms, command keys, the slot map
/// and redirects.
final class RedisTopologyTests: XCTestCase {
    typealias Address = RedisEndpoint.Address

    func testEndpointForms() throws {
        let one = try XCTUnwrap(RedisEndpoint(url: "redis://:pw@10.0.0.1:7000/2"))
        XCTAssertEqual(one.addresses, [Address(host: "10.0.0.1", port: 7000)])
        XCTAssertEqual(one.password, "pw")
        XCTAssertEqual(one.database, 2)
        XCTAssertFalse(one.isSentinel)

        let seeds = try XCTUnwrap(RedisEndpoint(url: "redis://a:7000,b,c:7002"))
        XCTAssertEqual(seeds.addresses, [Address(host: "a", port: 7000), Address(host: "b", port: 6379), Address(host: "c", port: 7002)])
        XCTAssertEqual(seeds.database, 0)

        let sentinel = try XCTUnwrap(RedisEndpoint(url: "redis+sentinel://:secret@s1,s2:26380/mymaster/3"))
        XCTAssertEqual(sentinel.addresses, [Address(host: "s1", port: 26379), Address(host: "s2", port: 26380)])
        XCTAssertEqual(sentinel.sentinelMaster, "mymaster")
        XCTAssertEqual(sentinel.database, 3)
        XCTAssertEqual(sentinel.password, "secret")
        XCTAssertEqual(RedisEndpoint(url: "redis+sentinel://s1/relay")?.database, 0)
    }

    func testMalformedEndpointsAreRefused() {
        for bad in [
            "http://x", "redis://", "redis://a:0", "redis://a:65536", "redis://a:x", "redis://a,", "redis://,a",
            "redis://a:1,b:2/3",  // a cluster has no databases
            "redis+sentinel://s1", "redis+sentinel://s1/", "redis+sentinel://s1/m/x", "redis+sentinel://s1/m/1/2", "redis://a/-1",
        ] {
            XCTAssertNil(RedisEndpoint(url: bad), bad)
        }
        XCTAssertNil(RedisEndpoint(url: "redis://" + Array(repeating: "h:1", count: 65).joined(separator: ",")))
    }

    func testCommandKeys() {
        XCTAssertEqual(RedisCommandKey.key(of: ["EVAL", "script", "2", "k1", "k2", "a"]), "k1")
        XCTAssertNil(RedisCommandKey.key(of: ["EVAL", "script", "0", "a"]))
        XCTAssertNil(RedisCommandKey.key(of: ["EVAL", "script", "x"]))
        XCTAssertEqual(RedisCommandKey.key(of: ["XADD", "s", "*", "f", "v"]), "s")
        XCTAssertEqual(RedisCommandKey.key(of: ["XINFO", "STREAM", "s"]), "s")
        XCTAssertEqual(RedisCommandKey.key(of: ["spublish", "relay:room:{a}", "x"]), "relay:room:{a}")
        XCTAssertNil(RedisCommandKey.key(of: ["PING"]))
        XCTAssertNil(RedisCommandKey.key(of: ["CLUSTER", "SLOTS"]))
        XCTAssertNil(RedisCommandKey.key(of: ["GET"]))
        XCTAssertNil(RedisCommandKey.key(of: []))
    }

    private func node(_ host: String, _ port: Int64) -> RESPValue {
        .array([.bulkString(ByteBuffer(string: host)), .integer(port), .bulkString(ByteBuffer(string: "id"))])
    }

    func testSlotMapFromClusterSlots() throws {
        let reply = RESPValue.array([
            .array([.integer(0), .integer(5460), node("127.0.0.1", 7000), node("127.0.0.1", 7003)]),
            .array([.integer(5461), .integer(10922), node("127.0.0.1", 7001), node("127.0.0.1", 7004)]),
            .array([.integer(10923), .integer(16383), node("", 7002), node("127.0.0.1", 7005)]),
        ])
        var map = try XCTUnwrap(RedisSlotMap(clusterSlots: reply, answeredBy: Address(host: "10.1.1.1", port: 7002)))
        XCTAssertTrue(map.coversEverySlot)
        XCTAssertEqual(map.masters.map(\.port), [7000, 7001, 7002])
        XCTAssertEqual(map.nodes.count, 6)
        XCTAssertEqual(map.owner(of: 0)?.port, 7000)
        XCTAssertEqual(map.owner(of: 5461)?.port, 7001)
        // An empty host is the node that answered.
        XCTAssertEqual(map.owner(of: 16383), Address(host: "10.1.1.1", port: 7002))
        XCTAssertNil(map.owner(of: 16384))
        XCTAssertNil(map.owner(of: -1))
        map.move(slot: 1, to: Address(host: "127.0.0.1", port: 7003))
        XCTAssertEqual(map.owner(of: 1)?.port, 7003)
        XCTAssertEqual(map.owner(of: 0)?.port, 7000)
        XCTAssertEqual(map.masters.count, 4)
    }

    func testPartialAndMalformedSlotMaps() throws {
        let partial = try XCTUnwrap(RedisSlotMap(clusterSlots: .array([.array([.integer(0), .integer(100), node("h", 1)])]), answeredBy: Address(host: "h", port: 1)))
        XCTAssertFalse(partial.coversEverySlot)
        XCTAssertNil(partial.owner(of: 101))
        let answered = Address(host: "h", port: 1)
        for bad: RESPValue in [
            .integer(1),
            .array([.array([.integer(0), .integer(16384), node("h", 1)])]),
            .array([.array([.integer(5), .integer(4), node("h", 1)])]),
            .array([.array([.integer(0), .integer(1)])]),
            .array([.array([.integer(0), .integer(1), node("h", 0)])]),
            .array([.array([.integer(0), .integer(1), .array([.bulkString(ByteBuffer(string: "h"))])])]),
        ] {
            XCTAssertNil(RedisSlotMap(clusterSlots: bad, answeredBy: answered), "\(bad)")
        }
        // More masters than a cluster may have: refused, not kept.
        let many = RESPValue.array((0..<1_001).map { i in .array([.integer(Int64(i)), .integer(Int64(i)), node("h", Int64(1 + i))]) })
        XCTAssertNil(RedisSlotMap(clusterSlots: many, answeredBy: answered))
        let single = RedisSlotMap(single: answered)
        XCTAssertTrue(single.coversEverySlot)
        XCTAssertEqual(single.owner(of: 16383), answered)
    }

    func testRedirects() {
        XCTAssertEqual(RedisRedirect(error: "MOVED 3999 127.0.0.1:6381"), .moved(slot: 3999, to: Address(host: "127.0.0.1", port: 6381)))
        XCTAssertEqual(RedisRedirect(error: "ASK 3999 10.0.0.2:7000"), .ask(slot: 3999, to: Address(host: "10.0.0.2", port: 7000)))
        XCTAssertNil(RedisRedirect(error: "MOVED 16384 h:1"))
        XCTAssertNil(RedisRedirect(error: "MOVED x h:1"))
        XCTAssertNil(RedisRedirect(error: "ERR wrong"))
        XCTAssertNil(RedisRedirect(error: "MOVED 1 h:0"))
        XCTAssertTrue(RedisRedirect.isTransient("TRYAGAIN Multiple keys request during rehashing of slot"))
        XCTAssertTrue(RedisRedirect.isTransient("CLUSTERDOWN The cluster is down"))
        XCTAssertTrue(RedisRedirect.isTransient("READONLY You can't write against a read only replica."))
        XCTAssertFalse(RedisRedirect.isTransient("ERR unknown command"))
    }

    // MARK: Hostile replies and strings (seeded random inputs: the fuzz build compiles RelayCore
    // only, and these parsers read what a Redis server sends)

    private func randomValue(_ rng: inout SplitMix64, depth: Int) -> RESPValue {
        let ints: [Int64] = [-1, 0, 1, 5460, 5461, 16383, 16384, 65535, 65536, .max, .min]
        switch Int.random(in: 0..<(depth > 3 ? 4 : 6), using: &rng) {
        case 0: return .integer(Bool.random(using: &rng) ? ints.randomElement(using: &rng) ?? 0 : Int64.random(in: -5...70000, using: &rng))
        case 1: return .bulkString(ByteBuffer(string: ["", "?", "127.0.0.1", "h", "::1", "x:y"].randomElement(using: &rng) ?? ""))
        case 2: return .null
        case 3: return .simpleString("OK")
        default:
            let n = Int.random(in: 0...5, using: &rng)
            return .array((0..<n).map { _ in randomValue(&rng, depth: depth + 1) })
        }
    }

    func testRandomClusterSlotsRepliesNeverTrap() {
        var rng = SplitMix64(seed: 31)
        let answered = Address(host: "10.0.0.1", port: 7000)
        var parsed = 0
        for _ in 0..<50_000 {
            let value = randomValue(&rng, depth: 0)
            guard let map = RedisSlotMap(clusterSlots: value, answeredBy: answered) else { continue }
            parsed += 1
            for slot in [0, 1, 5461, 16383] {
                if let owner = map.owner(of: slot) {
                    XCTAssertTrue(map.masters.contains(owner))
                    XCTAssertTrue((1...65535).contains(owner.port))
                }
            }
        }
        XCTAssertGreaterThan(parsed, 0, "some random replies are well-formed maps")
    }

    func testRandomRedirectsAndEndpointsNeverTrap() {
        var rng = SplitMix64(seed: 7)
        let pieces = ["MOVED", "ASK", " ", "1", "16383", "16384", "-1", "h", ":", "6379", "0", "65536", "redis://", "redis+sentinel://",
                      ",", "/", "@", "pw", "::1", "[", "]", "\u{0}", "é", "99999999999999999999"]
        for _ in 0..<50_000 {
            let text = (0..<Int.random(in: 0...8, using: &rng)).map { _ in pieces.randomElement(using: &rng) ?? "" }.joined()
            if let redirect = RedisRedirect(error: text) {
                switch redirect {
                case .moved(let slot, let to), .ask(let slot, let to):
                    XCTAssertTrue((0..<RedisHashSlot.count).contains(slot))
                    XCTAssertTrue((1...65535).contains(to.port))
                }
            }
            if let endpoint = RedisEndpoint(url: text) {
                XCTAssertFalse(endpoint.addresses.isEmpty)
                XCTAssertTrue(endpoint.addresses.allSatisfy { (1...65535).contains($0.port) && !$0.host.isEmpty })
            }
            _ = RedisCommandKey.key(of: text.split(separator: " ").map(String.init))
            _ = RedisHashSlot.slot(of: text)
        }
    }
}
