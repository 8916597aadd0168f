import RelayTestSupport
import XCTest
@testable import RelayCore

final class CompactJWTTests: XCTestCase {
    func b64(_ s: String) -> String { Base64URL.encode(Array(s.utf8)) }

    func jwt(header: String = #"{"alg":"HS256","typ":"JWT"}"#, payload: String, signature: String = "c2ln") -> String {
        "\(b64(header)).\(b64(payload)).\(signature)"
    }

    func code(_ body: () throws(RelayError) -> Void) -> RelayErrorCode? {
        do {
            try body()
            return nil
        } catch {
            return error.code
        }
    }

    // MARK: - Base64URL

    func testBase64URLRoundTrips() {
        var rng = SplitMix64(seed: 64)
        for n in 0..<200 {
            let bytes = (0..<(n % 40)).map { _ in UInt8.random(in: 0...255, using: &rng) }
            let encoded = Base64URL.encode(bytes)
            XCTAssertFalse(encoded.contains("="))
            XCTAssertEqual(Base64URL.decode(Array(encoded.utf8)), bytes, encoded)
        }
        XCTAssertEqual(Base64URL.encode(Array("hello?>".utf8)), "aGVsbG8_Pg")
    }

    func testBase64URLRefusesNonCanonicalInput() {
        for bad in ["a", "aGVsbG8=", "aGVsbG8+", "aGVsbG8/", "aGVs bG8", "aGVsbG9", "aR", "AAB", "é"] {
            XCTAssertNil(Base64URL.decode(Array(bad.utf8)), bad)
        }
        XCTAssertEqual(Base64URL.decode([UInt8]()), [])
        XCTAssertEqual(Base64URL.decode(Array("aQ".utf8)), [0x69])
        XCTAssertNil(Base64URL.decode(Array(repeating: UInt8(ascii: "A"), count: 20), maxInputBytes: 16))
    }

    // MARK: - Header

    func testParsesHeader() throws {
        let token = jwt(payload: #"{"sub":"a","exp":5}"#)
        let parsed = try CompactJWT.parse(token)
        XCTAssertEqual(parsed.algorithm, "HS256")
        XCTAssertEqual(try parsed.claims(), TokenClaims(subject: "a", expiresAt: 5))
    }

    func testHeaderFailures() {
        let payload = #"{"sub":"a","exp":5}"#
        let cases: [(String, RelayErrorCode)] = [
            ("", .tokenMissing),
            ("abc", .tokenMalformed),
            ("a.b", .tokenMalformed),
            ("a.b.c.d", .tokenMalformed),
            ("...", .tokenMalformed),
            (String(repeating: "a", count: 8193), .tokenMalformed),
            (jwt(header: "[]", payload: payload), .tokenMalformed),
            (jwt(header: "{}", payload: payload), .tokenMalformed),
            (jwt(header: #"{"alg":1}"#, payload: payload), .tokenMalformed),
            (jwt(header: #"{"alg":"none"}"#, payload: payload, signature: ""), .tokenAlgNone),
            (jwt(header: #"{"alg":"NoNe"}"#, payload: payload), .tokenAlgNone),
            (jwt(header: #"{"alg":"HS256","crit":["b64"],"b64":false}"#, payload: payload), .tokenMalformed),
            (jwt(header: #"{"alg":"HS256","alg":"HS256"}"#, payload: payload), .tokenMalformed),
            (jwt(payload: payload, signature: "c2ln="), .tokenMalformed),
            (jwt(payload: payload, signature: "c2l"), .tokenMalformed),  // non-zero unused bits
            ("e30.\u{301}.e30", .tokenMalformed),
        ]
        for (token, expected) in cases {
            XCTAssertEqual(code { () throws(RelayError) in _ = try CompactJWT.parse(token) }, expected, String(token.prefix(80)))
        }
        XCTAssertEqual(code { () throws(RelayError) in _ = try CompactJWT.algorithm(fromHeader: Array(#"{"alg":"ES256"}"#.utf8)) }, nil)
    }

    /// `.` followed by a combining mark is one Character but still a separator byte.
    func testSplitsOnBytes() {
        let token = jwt(payload: "{}") + ".\u{301}"
        XCTAssertEqual(code { () throws(RelayError) in _ = try CompactJWT.parse(token) }, .tokenMalformed)
    }

    // MARK: - Claims

    func testClaims() throws {
        let claims = try TokenClaims.parse(Array(#"{"sub":"al\u00efce","exp":10.9,"nbf":2.1,"iat":-3.5,"rooms":["a","b:*"],"other":{}}"#.utf8))
        XCTAssertEqual(claims, TokenClaims(subject: "al\u{EF}ce", expiresAt: 10, notBefore: 3, issuedAt: -4, rooms: ["a", "b:*"]))
    }

    func testClaimFailures() {
        let cases: [(String, RelayErrorCode)] = [
            ("", .tokenMalformed),
            ("[]", .tokenMalformed),
            (#"{"sub":"a","exp":1,"exp":2}"#, .tokenMalformed),
            (#"{"exp":1}"#, .tokenInvalidClaims),
            (#"{"sub":"","exp":1}"#, .tokenInvalidClaims),
            (#"{"sub":"a"}"#, .tokenInvalidClaims),
            (#"{"sub":"a","exp":"1"}"#, .tokenMalformed),
            (#"{"sub":["a"],"exp":1}"#, .tokenMalformed),
            (#"{"sub":"a","exp":9223372036854775808}"#, .tokenInvalidClaims),
            (#"{"sub":"a","exp":1e300}"#, .tokenInvalidClaims),
            (#"{"sub":"a","exp":-1e300}"#, .tokenInvalidClaims),
            (#"{"sub":"a","exp":9.3e18}"#, .tokenInvalidClaims),
            (#"{"sub":"a","exp":1,"rooms":[null]}"#, .tokenMalformed),
            (#"{"sub":"a","exp":1,"rooms":["e\u0301"]}"#, .tokenInvalidClaims),
        ]
        for (json, expected) in cases {
            XCTAssertEqual(code { () throws(RelayError) in _ = try TokenClaims.parse(Array(json.utf8)) }, expected, json)
        }
    }

    func testTimeConversionBounds() {
        let limit = Double(TokenClaims.maxTimeMagnitude)
        XCTAssertEqual(TokenClaims.seconds(limit, rounding: .down), 1 << 53)
        XCTAssertEqual(TokenClaims.seconds(-limit, rounding: .up), -(1 << 53))
        XCTAssertNil(TokenClaims.seconds(limit.nextUp, rounding: .down))
        XCTAssertNil(TokenClaims.seconds(-limit.nextUp, rounding: .down))
        XCTAssertEqual(TokenClaims.seconds(limit - 0.5, rounding: .up), 1 << 53)
        for d in [Double.nan, .infinity, -.infinity, 9.3e18, 0x1p63, -0x1p63, 1e300, -1e300, .greatestFiniteMagnitude] {
            XCTAssertNil(TokenClaims.seconds(d, rounding: .down), "\(d)")
        }
        XCTAssertEqual(TokenClaims.seconds(-0.5, rounding: .down), -1)
        XCTAssertEqual(TokenClaims.seconds(-0.5, rounding: .up), 0)
    }

    func testExpiryArithmeticSaturates() {
        let claims = TokenClaims(subject: "a", expiresAt: Int64.max, notBefore: Int64.min)
        XCTAssertFalse(claims.isExpired(now: Int64.max - 1, leeway: .max))
        XCTAssertFalse(claims.isNotYetValid(now: Int64.min, leeway: .max))
        XCTAssertTrue(TokenClaims(subject: "a", expiresAt: Int64.min).isExpired(now: 0, leeway: .min))
        XCTAssertFalse(TokenClaims(subject: "a", expiresAt: 0, notBefore: Int64.max).isNotYetValid(now: 0, leeway: .max))
        let edge = TokenClaims(subject: "a", expiresAt: 100, notBefore: 100)
        XCTAssertTrue(edge.isExpired(now: 130, leeway: 30))
        XCTAssertFalse(edge.isExpired(now: 129, leeway: 30))
        XCTAssertTrue(edge.isNotYetValid(now: 69, leeway: 30))
        XCTAssertFalse(edge.isNotYetValid(now: 70, leeway: 30))
        XCTAssertFalse(TokenClaims(subject: "a", expiresAt: 1).isNotYetValid(now: 0, leeway: 0))
    }
}
