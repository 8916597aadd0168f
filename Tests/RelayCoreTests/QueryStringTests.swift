import RelayTestSupport
import XCTest
@testable import RelayCore

final class QueryStringTests: XCTestCase {
    func testPathAndParameters() {
        let q = QueryString(uri: "/socket.io/?EIO=4&transport=websocket&token=a.b.c")
        XCTAssertEqual(q.path, "/socket.io/")
        XCTAssertEqual(q["EIO"], "4")
        XCTAssertEqual(q["transport"], "websocket")
        XCTAssertEqual(q["token"], "a.b.c")
        XCTAssertNil(q["missing"])
    }

    func testNoQuery() {
        XCTAssertEqual(QueryString(uri: "/health").path, "/health")
        XCTAssertEqual(QueryString(uri: "").path, "")
        XCTAssertEqual(QueryString(uri: "?a=1").path, "")
        XCTAssertEqual(QueryString(uri: "?a=1")["a"], "1")
        XCTAssertEqual(QueryString(uri: "/p?").path, "/p")
    }

    func testDecoding() {
        let q = QueryString(uri: "/?a=hello+world&b=%41%62%2B&c=caf%C3%A9&d=%E2%82%AC&e=x=y&f&=empty&g=")
        XCTAssertEqual(q["a"], "hello world")
        XCTAssertEqual(q["b"], "Ab+")
        XCTAssertEqual(q["c"], "café")
        XCTAssertEqual(q["d"], "€")
        XCTAssertEqual(q["e"], "x=y", "only the first = separates")
        XCTAssertEqual(q["f"], "")
        XCTAssertEqual(q[""], "empty")
        XCTAssertEqual(q["g"], "")
    }

    func testInvalidEscapesAreKeptLiterally() {
        let q = QueryString(uri: "/?a=%&b=%4&c=%zz%41&d=100%&e=%%41&f=%4G")
        XCTAssertEqual(q["a"], "%")
        XCTAssertEqual(q["b"], "%4")
        XCTAssertEqual(q["c"], "%zzA")
        XCTAssertEqual(q["d"], "100%")
        XCTAssertEqual(q["e"], "%A")
        XCTAssertEqual(q["f"], "%4G")
    }

    func testInvalidUTF8DropsTheParameter() {
        let q = QueryString(uri: "/?a=%FF&b=ok&%C3=x&c=%C3%28&d=%ED%A0%80&token=t")
        XCTAssertNil(q["a"])
        XCTAssertEqual(q["b"], "ok")
        XCTAssertNil(q["c"])
        XCTAssertNil(q["d"], "an encoded surrogate is not UTF-8")
        XCTAssertEqual(q["token"], "t")
    }

    func testFirstValueWins() {
        let q = QueryString(uri: "/?token=first&token=second&t%6Fken=third")
        XCTAssertEqual(q["token"], "first")
    }

    func testParameterCountIsBounded() {
        let pairs = (0..<100).map { "p\($0)=\($0)" }.joined(separator: "&")
        let q = QueryString(uri: "/?" + pairs)
        XCTAssertEqual(q["p0"], "0")
        XCTAssertEqual(q["p63"], "63")
        XCTAssertNil(q["p64"])
        XCTAssertNil(q["p99"])
        // Empty pairs do not count.
        let sparse = QueryString(uri: "/?" + String(repeating: "&", count: 500) + "token=x")
        XCTAssertEqual(sparse["token"], "x")
    }

    func testDecodeKeepsOldFallback() {
        XCTAssertEqual(QueryString.decode("a%20b+c"), "a b c")
        XCTAssertEqual(QueryString.decode("room%3A1"), "room:1")
        XCTAssertEqual(QueryString.decode("%FF+x"), "%FF x")
        XCTAssertEqual(QueryString.decode(""), "")
    }

    func testRandomInputsNeverTrap() {
        var rng = SplitMix64(seed: 9)
        let alphabet = Array("?&=%+aF0é/".unicodeScalars)
        for _ in 0..<10_000 {
            var uri = ""
            for _ in 0..<Int.random(in: 0...20, using: &rng) { uri.unicodeScalars.append(alphabet[Int.random(in: 0..<alphabet.count, using: &rng)]) }
            let q = QueryString(uri: uri)
            XCTAssertTrue(uri.hasPrefix(q.path))
            _ = q["a"]
        }
    }
}
