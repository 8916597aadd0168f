import NIOCore
import XCTest

@testable import RelayRedis

final class RESPParserTests: XCTestCase {
    func parse(_ s: String) throws -> RESPValue? {
        var b = ByteBuffer(string: s)
        var p = RESPParser()
        return try p.parse(&b)
    }

    func testRESP2Types() throws {
        XCTAssertEqual(try parse("+OK\r\n"), .simpleString("OK"))
        XCTAssertEqual(try parse("-ERR nope\r\n"), .error("ERR nope"))
        XCTAssertEqual(try parse(":42\r\n"), .integer(42))
        XCTAssertEqual(try parse("$5\r\nhello\r\n"), .bulkString(ByteBuffer(string: "hello")))
        XCTAssertEqual(try parse("$-1\r\n"), .null)
        XCTAssertEqual(try parse("*2\r\n$1\r\na\r\n:1\r\n"), .array([.bulkString(ByteBuffer(string: "a")), .integer(1)]))
        XCTAssertEqual(try parse("*-1\r\n"), .null)
    }

    func testRESP3Types() throws {
        XCTAssertEqual(try parse("_\r\n"), .null)
        XCTAssertEqual(try parse("#t\r\n"), .boolean(true))
        XCTAssertEqual(try parse(",3.5\r\n"), .double(3.5))
        XCTAssertEqual(try parse("(123456789012345678901234567890\r\n"), .bigNumber("123456789012345678901234567890"))
        XCTAssertEqual(try parse("%1\r\n+a\r\n:1\r\n"), .map([(.simpleString("a"), .integer(1))]))
        XCTAssertEqual(try parse("~1\r\n+x\r\n"), .set([.simpleString("x")]))
        XCTAssertEqual(try parse(">3\r\n+message\r\n+ch\r\n$2\r\nhi\r\n"), .push([.simpleString("message"), .simpleString("ch"), .bulkString(ByteBuffer(string: "hi"))]))
        XCTAssertEqual(try parse("=8\r\ntxt:abcd\r\n"), .verbatim("abcd"))
        XCTAssertEqual(try parse("!5\r\noops!\r\n"), .error("oops!"))
        XCTAssertEqual(try parse("|1\r\n+key\r\n+val\r\n:7\r\n"), .integer(7), "attributes are skipped")
    }

    func testIncompleteInputConsumesNothing() throws {
        for partial in ["+OK", "$5\r\nhel", "*2\r\n:1\r\n", ":4", "%1\r\n+a\r\n"] {
            var b = ByteBuffer(string: partial)
            var p = RESPParser()
            XCTAssertNil(try p.parse(&b), partial)
            XCTAssertEqual(b.readableBytes, partial.utf8.count, "nothing consumed for \(partial)")
        }
    }

    func testSeveralValuesInOneBuffer() throws {
        var b = ByteBuffer(string: "+A\r\n:2\r\n$1\r\nc\r\n")
        var p = RESPParser()
        XCTAssertEqual(try p.parse(&b), .simpleString("A"))
        XCTAssertEqual(try p.parse(&b), .integer(2))
        XCTAssertEqual(try p.parse(&b), .bulkString(ByteBuffer(string: "c")))
        XCTAssertNil(try p.parse(&b))
    }

    func testMalformedInputIsATypedError() {
        XCTAssertThrowsError(try parse("?x\r\n")) { XCTAssertEqual($0 as? RESPError, .invalidType(UInt8(ascii: "?"))) }
        XCTAssertThrowsError(try parse(":abc\r\n")) { XCTAssertEqual($0 as? RESPError, .invalidInteger) }
        XCTAssertThrowsError(try parse("$999999999999\r\n")) { XCTAssertEqual($0 as? RESPError, .invalidLength) }
        XCTAssertThrowsError(try parse(String(repeating: "*1\r\n", count: 40) + ":1\r\n")) { XCTAssertEqual($0 as? RESPError, .tooDeep) }
    }

    func testCommandEncoding() {
        var b = ByteBuffer()
        RESPParser.encodeCommand(["SET", "k", "vé"], into: &b)
        XCTAssertEqual(String(buffer: b), "*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$3\r\nvé\r\n")
        var c = ByteBuffer()
        RESPParser.encodeCommand(["PUBLISH", "ch"], payload: ByteBuffer(bytes: [0, 1, 2]), into: &c)
        XCTAssertEqual(Array(c.readableBytesView), Array("*3\r\n$7\r\nPUBLISH\r\n$2\r\nch\r\n$3\r\n".utf8) + [0, 1, 2] + Array("\r\n".utf8))
    }

    func testEndpointURLs() {
        XCTAssertEqual(RedisEndpoint(url: "redis://127.0.0.1:6380")?.port, 6380)
        XCTAssertEqual(RedisEndpoint(url: "redis://localhost")?.port, 6379)
        XCTAssertEqual(RedisEndpoint(url: "redis://:pw@h:1/2")?.password, "pw")
        XCTAssertEqual(RedisEndpoint(url: "redis://:pw@h:1/2")?.database, 2)
        XCTAssertNil(RedisEndpoint(url: "http://x"))
        XCTAssertNil(RedisEndpoint(url: "redis://h:99999"))
        XCTAssertNil(RedisEndpoint(url: "redis://"))
    }
}
