import XCTest

@testable import RelayRedis

final class RedisHashSlotTests: XCTestCase {
    /// Values from the Redis Cluster specification and `CLUSTER KEYSLOT` on redis-server 7.0.
    func testSlotsMatchRedis() {
        XCTAssertEqual(RedisHashSlot.crc16(Array("123456789".utf8)[...]), 0x31C3)
        XCTAssertEqual(RedisHashSlot.slot(of: "foo"), 12182)
        XCTAssertEqual(RedisHashSlot.slot(of: "bar"), 5061)
        XCTAssertEqual(RedisHashSlot.slot(of: "relay:receipts"), 9724)
        XCTAssertEqual(RedisHashSlot.slot(of: ""), 0)
        XCTAssertEqual(RedisHashSlot.slot(of: "x{{a}}"), 10276)
        XCTAssertEqual(RedisHashSlot.slot(of: "a{}b"), 13694)
    }

    func testHashTags() {
        XCTAssertEqual(RedisHashSlot.slot(of: "relay:presence:{lobby}"), RedisHashSlot.slot(of: "lobby"))
        XCTAssertEqual(RedisHashSlot.slot(of: "relay:room:{lobby}"), RedisHashSlot.slot(of: "relay:history:r:{lobby}"))
        // An empty tag hashes the whole key; only the first `{` counts.
        XCTAssertEqual(RedisHashSlot.slot(of: "a{}b"), Int(RedisHashSlot.crc16(Array("a{}b".utf8)[...]) & 0x3FFF))
        XCTAssertEqual(RedisHashSlot.slot(of: "{a}{b}"), RedisHashSlot.slot(of: "a"))
        XCTAssertEqual(RedisHashSlot.slot(of: "x{{a}}"), RedisHashSlot.slot(of: "{a"))
        XCTAssertEqual(RedisHashSlot.slot(of: "no{close"), Int(RedisHashSlot.crc16(Array("no{close".utf8)[...]) & 0x3FFF))
    }
}
