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
}
