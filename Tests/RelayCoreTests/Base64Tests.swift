import RelayTestSupport
import XCTest
@testable import RelayCore

final class Base64Tests: XCTestCase {
    private func encode(_ s: String) -> String { String(decoding: Base64.encode(Array(s.utf8)), as: UTF8.self) }
    private func decode(_ s: String) -> [UInt8]? { Base64.decode(Array(s.utf8)) }

    /// RFC 4648 §10.
    func testRFC4648Vectors() {
        let vectors = [("", ""), ("f", "Zg=="), ("fo", "Zm8="), ("foo", "Zm9v"), ("foob", "Zm9vYg=="), ("fooba", "Zm9vYmE="), ("foobar", "Zm9vYmFy")]
        for (plain, encoded) in vectors {
            XCTAssertEqual(encode(plain), encoded)
            XCTAssertEqual(decode(encoded), Array(plain.utf8))
            // Padding may be left out.
            let unpadded = String(encoded.prefix { $0 != "=" })
            XCTAssertEqual(decode(unpadded), Array(plain.utf8), unpadded)
            XCTAssertEqual(Base64.decodedLength(of: Array(encoded.utf8)), plain.utf8.count)
            XCTAssertEqual(Base64.encodedLength(of: plain.utf8.count), encoded.utf8.count)
        }
    }

    func testStandardAlphabetNotURL() {
        XCTAssertEqual(String(decoding: Base64.encode([0xFB, 0xFF, 0xBF]), as: UTF8.self), "+/+/")
        XCTAssertEqual(decode("+/+/"), [0xFB, 0xFF, 0xBF])
        XCTAssertNil(decode("-_-_"))
    }

    func testRefusesNonCanonicalInput() {
        for bad in [
            "Z", "Zg=", "Zg===", "Z===", "=", "==", "====", "Zh==", "Zm9=", "Zm9vYg=Y", "Zg==Zg==", "=Zg=", "Zm9v\n", " Zm9v", "Zm 9v",
            "Zm9v.", "Zm9vYmFy=", "Zm\u{0}v",
        ] {
            XCTAssertNil(decode(bad), bad.debugDescription)
        }
    }

    func testDecodedLength() {
        XCTAssertNil(Base64.decodedLength(of: Array("A".utf8)))
        XCTAssertNil(Base64.decodedLength(of: Array("AB=".utf8)))
        XCTAssertEqual(Base64.decodedLength(of: Array("AB".utf8)), 1)
        XCTAssertEqual(Base64.decodedLength(of: Array("ABC".utf8)), 2)
        XCTAssertEqual(Base64.decodedLength(of: Array("ABCD".utf8)), 3)
        XCTAssertEqual(Base64.decodedLength(of: ArraySlice("xxABC=".utf8).dropFirst(2)), 2)
    }

    func testRoundTripEveryLength() {
        var rng = SplitMix64(seed: 64)
        for length in 0..<200 {
            let bytes = (0..<length).map { _ in UInt8.random(in: 0...255, using: &rng) }
            let encoded = Base64.encode(bytes)
            XCTAssertEqual(encoded.count, Base64.encodedLength(of: length))
            XCTAssertEqual(Base64.decode(encoded), bytes)
            XCTAssertEqual(Base64.decode(encoded[...]), bytes)
        }
        XCTAssertEqual(Base64.decode(Base64.encode(Array(0...255))), Array(0...255))
    }

    func testEncodesSlicesAndAppends() {
        var out: [UInt8] = Array("b".utf8)
        let source: [UInt8] = [9, 1, 2, 3, 9]
        Base64.encode(source[1..<4], into: &out)
        XCTAssertEqual(String(decoding: out, as: UTF8.self), "bAQID")
    }
}
