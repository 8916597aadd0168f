import Crypto
import Foundation
import JWTKit
import RelayCore
import XCTest

@testable import RelayServer

final class TokenVerifierTests: XCTestCase {
    let secret = "0123456789abcdef0123456789abcdef"
    let now: Int64 = 1_800_000_000

    func verifier(leeway: Int64 = 30) async throws -> TokenVerifier {
        let now = self.now
        return try await TokenVerifier(algorithm: .hs256(secret: secret), leewaySeconds: leeway, now: { now })
    }

    /// Builds an HS256-signed (or unsigned) token by hand so every field can be wrong.
    func token(header: String = #"{"alg":"HS256","typ":"JWT"}"#, payload: String, secret: String? = nil, signature: String? = nil) -> String {
        let h = Self.b64(Array(header.utf8))
        let p = Self.b64(Array(payload.utf8))
        let key = SymmetricKey(data: Array((secret ?? self.secret).utf8))
        let mac = HMAC<SHA256>.authenticationCode(for: Array("\(h).\(p)".utf8), using: key)
        return "\(h).\(p).\(signature ?? Self.b64(Array(mac)))"
    }

    static func b64(_ bytes: [UInt8]) -> String {
        Data(bytes).base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_").replacingOccurrences(of: "=", with: "")
    }

    func code(_ token: String) async throws -> RelayErrorCode? {
        if case .failure(let e) = try await verifier().verify(token) { return e.code }
        return nil
    }

    func testValidTokenGivesUserAndRooms() async throws {
        let t = token(payload: #"{"sub":"alice","exp":\#(now + 60),"rooms":["conversation:*","user:alice"]}"#)
        let result = try await verifier().verify(t)
        let user = try result.get()
        XCTAssertEqual(user.userID, "alice")
        XCTAssertTrue(user.rooms.allows("conversation:7"))
        XCTAssertTrue(user.rooms.allows("user:alice"))
        XCTAssertFalse(user.rooms.allows("user:bob"))
    }

    func testIssuerTokensVerify() async throws {
        let t = try await TokenIssuer.sign(secret: secret, subject: "bob", rooms: ["a"], ttlSeconds: 60, now: Date(timeIntervalSince1970: TimeInterval(now)))
        let user = try await verifier().verify(t).get()
        XCTAssertEqual(user.userID, "bob")
    }

    func testEachFailureHasItsOwnCode() async throws {
        let exp = now + 60
        let cases: [(String, RelayErrorCode)] = [
            ("", .tokenMissing),
            ("abc", .tokenMalformed),
            ("a.b", .tokenMalformed),
            (token(header: #"{"alg":"none"}"#, payload: #"{"sub":"a","exp":\#(exp)}"#, signature: ""), .tokenAlgNone),
            (token(header: #"{"alg":"HS512"}"#, payload: #"{"sub":"a","exp":\#(exp)}"#), .tokenAlgMismatch),
            (token(header: #"{"alg":"RS256"}"#, payload: #"{"sub":"a","exp":\#(exp)}"#), .tokenAlgMismatch),
            (token(payload: #"{"sub":"a","exp":\#(exp)}"#, secret: "another-secret-another-secret-0000"), .tokenBadSignature),
            (token(payload: #"{"sub":"a","exp":\#(now - 31)}"#), .tokenExpired),
            (token(payload: #"{"sub":"a","exp":\#(exp),"nbf":\#(now + 31)}"#), .tokenNotYetValid),
            (token(payload: #"{"sub":"a"}"#), .tokenInvalidClaims),
            (token(payload: #"{"exp":\#(exp)}"#), .tokenInvalidClaims),
            (token(payload: #"{"sub":"","exp":\#(exp)}"#), .tokenInvalidClaims),
            (token(payload: #"{"sub":"a","exp":"soon"}"#), .tokenMalformed),
        ]
        for (t, expected) in cases {
            let got = try await code(t)
            XCTAssertEqual(got, expected, "token \(t)")
        }
    }

    func testLeewayAcceptsSlightlyExpiredToken() async throws {
        let t = token(payload: #"{"sub":"a","exp":\#(now - 10)}"#)
        let got = try await code(t)
        XCTAssertNil(got)
    }

    func testShortSecretIsRejectedBeforeJWTKit() async throws {
        do {
            _ = try await TokenVerifier(algorithm: .hs256(secret: "short"))
            XCTFail("a short secret must be refused")
        } catch let error as TokenIssuer.SecretError {
            XCTAssertEqual(error, .tooShort(5))
        }
    }

    func testES256PublicKeyVerifiesES256TokensOnly() async throws {
        let privateKey = P256.Signing.PrivateKey()
        let pem = privateKey.publicKey.pemRepresentation
        let now = self.now
        let verifier = try await TokenVerifier(algorithm: .es256(publicKeyPEM: pem), now: { now })
        let keys = JWTKeyCollection()
        await keys.add(ecdsa: try ES256PrivateKey(pem: privateKey.pemRepresentation))
        let claims = RelayClaims(sub: "carol", exp: ExpirationClaim(value: Date(timeIntervalSince1970: TimeInterval(now + 60))), rooms: ["x"])
        let good = try await keys.sign(claims)
        let user = try await verifier.verify(good).get()
        XCTAssertEqual(user.userID, "carol")
        let hs = token(payload: #"{"sub":"a","exp":\#(now + 60)}"#)
        if case .failure(let e) = await verifier.verify(hs) { XCTAssertEqual(e.code, .tokenAlgMismatch) } else { XCTFail("HS256 accepted by an ES256 relay") }
    }

    // MARK: - Hostile claims (RelayCore's CompactJWT/TokenClaims; no trap anywhere)

    func testHugeAndNegativeTimeClaimsNeverTrap() async throws {
        let exp = now + 60
        let cases: [(String, RelayErrorCode?)] = [
            (#"{"sub":"a","exp":9223372036854775808}"#, .tokenInvalidClaims),  // 2^63
            (#"{"sub":"a","exp":9223372036854775807}"#, .tokenInvalidClaims),  // Int64.max
            (#"{"sub":"a","exp":9.3e18}"#, .tokenInvalidClaims),
            (#"{"sub":"a","exp":1e300}"#, .tokenInvalidClaims),
            (#"{"sub":"a","exp":-1e300}"#, .tokenInvalidClaims),
            (#"{"sub":"a","exp":-9223372036854775808}"#, .tokenInvalidClaims),
            (#"{"sub":"a","exp":9007199254740993}"#, .tokenInvalidClaims),  // 2^53 + 1
            (#"{"sub":"a","exp":9007199254740992}"#, nil),  // 2^53: the largest accepted
            (#"{"sub":"a","exp":-1}"#, .tokenExpired),
            (#"{"sub":"a","exp":0}"#, .tokenExpired),
            (#"{"sub":"a","exp":\#(exp).75}"#, nil),
            (#"{"sub":"a","exp":\#(exp),"nbf":9223372036854775808}"#, .tokenInvalidClaims),
            (#"{"sub":"a","exp":\#(exp),"nbf":9.3e18}"#, .tokenInvalidClaims),
            (#"{"sub":"a","exp":\#(exp),"nbf":1e300}"#, .tokenInvalidClaims),
            (#"{"sub":"a","exp":\#(exp),"nbf":-1e300}"#, .tokenInvalidClaims),
            (#"{"sub":"a","exp":\#(exp),"nbf":-1}"#, nil),
            (#"{"sub":"a","exp":\#(exp),"nbf":\#(now + 30).5}"#, .tokenNotYetValid),  // rounded up to now + 31
            (#"{"sub":"a","exp":\#(exp),"iat":1e300}"#, .tokenInvalidClaims),
            (#"{"sub":"a","exp":\#(exp),"iat":-1}"#, nil),
            (#"{"sub":"a","exp":\#(exp),"nbf":null,"iat":null,"rooms":null}"#, nil),
            (#"{"sub":"a","exp":null}"#, .tokenInvalidClaims),
            (#"{"sub":"a","exp":true}"#, .tokenMalformed),
            (#"{"sub":"a","exp":\#(exp),"nbf":"1"}"#, .tokenMalformed),
        ]
        for (payload, expected) in cases {
            let got = try await code(token(payload: payload))
            XCTAssertEqual(got, expected, payload)
        }
    }

    func testHugeLeewayDoesNotOverflow() async throws {
        let now = self.now
        let verifier = try await TokenVerifier(algorithm: .hs256(secret: secret), leewaySeconds: .max, now: { now })
        for payload in [#"{"sub":"a","exp":9007199254740992,"nbf":-9007199254740992}"#, #"{"sub":"a","exp":-9007199254740992,"nbf":9007199254740992}"#] {
            if case .failure(let e) = await verifier.verify(token(payload: payload)) { XCTFail("\(payload): \(e)") }
        }
    }

    func testCritHeaderIsRefused() async throws {
        let payload = #"{"sub":"a","exp":\#(now + 60)}"#
        for header in [#"{"alg":"HS256","crit":["exp"],"exp":1}"#, #"{"alg":"HS256","crit":[]}"#, #"{"alg":"HS256","crit":null}"#] {
            let got = try await code(token(header: header, payload: payload))
            XCTAssertEqual(got, .tokenMalformed, header)
        }
    }

    func testDuplicateKeysAreRefused() async throws {
        let exp = now + 60
        let cases: [(header: String, payload: String)] = [
            (#"{"alg":"HS256","typ":"JWT"}"#, #"{"sub":"alice","sub":"admin","exp":\#(exp)}"#),
            (#"{"alg":"HS256","typ":"JWT"}"#, #"{"sub":"a","exp":\#(exp),"exp":9007199254740992}"#),
            (#"{"alg":"HS256","typ":"JWT"}"#, #"{"sub":"a","exp":\#(exp),"rooms":["x"],"rooms":["*"]}"#),
            (#"{"alg":"HS256","alg":"none"}"#, #"{"sub":"a","exp":\#(exp)}"#),
            (#"{"alg":"HS256","typ":"JWT","typ":"JWT"}"#, #"{"sub":"a","exp":\#(exp)}"#),
        ]
        for (header, payload) in cases {
            let got = try await code(token(header: header, payload: payload))
            XCTAssertEqual(got, .tokenMalformed, "\(header) \(payload)")
        }
    }

    func testNonNFCSubjectAndRoomsAreRefused() async throws {
        let exp = now + 60
        let cases: [(String, RelayErrorCode?)] = [
            (#"{"sub":"jose\u0301","exp":\#(exp)}"#, .tokenInvalidClaims),
            (#"{"sub":"jos\u00e9","exp":\#(exp)}"#, nil),
            (#"{"sub":"a\u0000","exp":\#(exp)}"#, .tokenInvalidClaims),
            (#"{"sub":"a\u0085","exp":\#(exp)}"#, .tokenInvalidClaims),
            (#"{"sub":"\#(String(repeating: "x", count: 257))","exp":\#(exp)}"#, .tokenInvalidClaims),
            (#"{"sub":5,"exp":\#(exp)}"#, .tokenMalformed),
            (#"{"sub":"a","exp":\#(exp),"rooms":["conversation:cafe\u0301"]}"#, .tokenInvalidClaims),
            (#"{"sub":"a","exp":\#(exp),"rooms":["conversation:*","team:e\u0301*"]}"#, .tokenInvalidClaims),
            (#"{"sub":"a","exp":\#(exp),"rooms":[""]}"#, .tokenInvalidClaims),
            (#"{"sub":"a","exp":\#(exp),"rooms":["x\ny"]}"#, .tokenInvalidClaims),
            (#"{"sub":"a","exp":\#(exp),"rooms":[1]}"#, .tokenMalformed),
            (#"{"sub":"a","exp":\#(exp),"rooms":"x"}"#, .tokenMalformed),
            (#"{"sub":"a","exp":\#(exp),"rooms":["conversation:caf\u00e9"]}"#, nil),
        ]
        for (payload, expected) in cases {
            let got = try await code(token(payload: payload))
            XCTAssertEqual(got, expected, payload)
        }
        let user = try await verifier().verify(token(payload: #"{"sub":"jos\u00e9","exp":\#(exp),"rooms":["conversation:caf\u00e9"]}"#)).get()
        XCTAssertFalse(user.rooms.allows("conversation:cafe\u{301}"))
        XCTAssertTrue(user.rooms.allows("conversation:caf\u{E9}"))
    }

    func testRoomsCountIsBounded() async throws {
        let exp = now + 60
        func payload(_ n: Int) -> String {
            // Short names: the 8192-byte token limit would otherwise be reached first.
            let rooms = Array(repeating: #""a""#, count: n).joined(separator: ",")
            return #"{"sub":"a","exp":\#(exp),"rooms":[\#(rooms)]}"#
        }
        let atLimit = try await code(token(payload: payload(1000)))
        XCTAssertNil(atLimit)
        let overLimit = try await code(token(payload: payload(1001)))
        XCTAssertEqual(overLimit, .tokenInvalidClaims)
    }

    func testNonCanonicalBase64IsMalformed() async throws {
        let t = token(payload: #"{"sub":"a","exp":\#(now + 60)}"#)
        let parts = t.split(separator: ".").map(String.init)
        for bad in ["\(parts[0])=.\(parts[1]).\(parts[2])", "\(parts[0]).\(parts[1]).\(parts[2])=", "\(parts[0]).\(parts[1]).\(parts[2]).x", "\(parts[0]) .\(parts[1]).\(parts[2])"] {
            let got = try await code(bad)
            XCTAssertEqual(got, .tokenMalformed, bad)
        }
    }

    func testBadSignatureIsReportedBeforeClaims() async throws {
        // A forger learns nothing about claim validation: the signature is checked first.
        let t = token(payload: #"{"sub":"jose\u0301","exp":1e300}"#, secret: "another-secret-another-secret-0000")
        let got = try await code(t)
        XCTAssertEqual(got, .tokenBadSignature)
    }
}
