import RelayTestSupport
import XCTest
@testable import RelayCore

final class PerMessageDeflateNegotiationTests: XCTestCase {
    let base = "permessage-deflate; server_no_context_takeover; client_no_context_takeover"

    func testPlainOfferIsAccepted() {
        let agreed = PerMessageDeflateNegotiation.negotiate(["permessage-deflate"])
        XCTAssertEqual(agreed, PerMessageDeflateNegotiation(serverMaxWindowBits: 15, responseHeader: base))
    }

    func testBrowserOfferIsAccepted() {
        let agreed = PerMessageDeflateNegotiation.negotiate(["permessage-deflate; client_max_window_bits"])
        XCTAssertEqual(agreed?.responseHeader, base)
        XCTAssertEqual(agreed?.serverMaxWindowBits, 15)
    }

    func testServerWindowBitsAreEchoed() {
        let agreed = PerMessageDeflateNegotiation.negotiate(["permessage-deflate; server_max_window_bits=10; client_max_window_bits=12"])
        XCTAssertEqual(agreed?.serverMaxWindowBits, 10)
        XCTAssertEqual(agreed?.responseHeader, base + "; server_max_window_bits=10")
    }

    func testQuotedValuesAreUnquoted() {
        XCTAssertEqual(PerMessageDeflateNegotiation.negotiate([#"permessage-deflate; server_max_window_bits="11""#])?.serverMaxWindowBits, 11)
        XCTAssertEqual(PerMessageDeflateNegotiation.negotiate([#"permessage-deflate; server_max_window_bits="1\1""#])?.serverMaxWindowBits, 11)
        XCTAssertNil(PerMessageDeflateNegotiation.negotiate([#"permessage-deflate; server_max_window_bits="""#]))
        XCTAssertNil(PerMessageDeflateNegotiation.negotiate([#"permessage-deflate; server_max_window_bits="1 1""#]))
        XCTAssertNil(PerMessageDeflateNegotiation.negotiate([#"permessage-deflate; server_max_window_bits="11"#]))
    }

    /// The inputs that used to trap with an index out of range.
    func testFormerCrashesAreRefusedCleanly() {
        for header in [
            "permessage-deflate; =", "permessage-deflate; ", "permessage-deflate;  ;x",
            "x, permessage-deflate; client_max_window_bits; =", "permessage-deflate;", "permessage-deflate;;",
            "permessage-deflate; ==", "permessage-deflate; =1", "permessage-deflate; server_max_window_bits=",
            "permessage-deflate; server_max_window_bits= ", ";", "=", ";=", "\"", "permessage-deflate; a=\"",
        ] {
            XCTAssertNil(PerMessageDeflateNegotiation.negotiate([header]), header.debugDescription)
        }
    }

    func testMalformedOfferFallsThroughToTheNextOne() {
        let agreed = PerMessageDeflateNegotiation.negotiate(["permessage-deflate; =, permessage-deflate; server_max_window_bits=9"])
        XCTAssertEqual(agreed?.serverMaxWindowBits, 9)
        let quotedComma = PerMessageDeflateNegotiation.negotiate([#"permessage-deflate; x="a,b", permessage-deflate"#])
        XCTAssertEqual(quotedComma?.responseHeader, base, "the comma inside quotes does not start an offer")
        XCTAssertEqual(PerMessageDeflateNegotiation.negotiate(["permessage-deflate; ;", "permessage-deflate"])?.responseHeader, base)
    }

    func testEmptyListElementsAreSkipped() {
        XCTAssertEqual(PerMessageDeflateNegotiation.negotiate([" , ,permessage-deflate ,"])?.responseHeader, base)
        XCTAssertEqual(PerMessageDeflateNegotiation.negotiate(["", ",", "permessage-deflate"])?.responseHeader, base)
        XCTAssertNil(PerMessageDeflateNegotiation.negotiate([]))
        XCTAssertNil(PerMessageDeflateNegotiation.negotiate([""]))
        XCTAssertNil(PerMessageDeflateNegotiation.negotiate([" , "]))
    }

    func testUnacceptableOffersAreDeclined() {
        for header in [
            "x-webkit-deflate-frame", "permessage-deflate; server_max_window_bits=8", "permessage-deflate; server_max_window_bits=16",
            "permessage-deflate; server_max_window_bits=010", "permessage-deflate; server_max_window_bits=+9",
            "permessage-deflate; server_max_window_bits", "permessage-deflate; client_max_window_bits=7",
            "permessage-deflate; client_max_window_bits=99999999999999999999999", "permessage-deflate; server_no_context_takeover=1",
            "permessage-deflate; unknown", "permessage-deflate; server_no_context_takeover; server_no_context_takeover",
            "Permessage-Deflate", "permessage-deflate x", "permessage-deflate; a b",
        ] {
            XCTAssertNil(PerMessageDeflateNegotiation.negotiate([header]), header)
        }
    }

    func testWhitespaceAroundSeparatorsIsTolerated() {
        let agreed = PerMessageDeflateNegotiation.negotiate(["\tpermessage-deflate ;server_max_window_bits = 12 ; client_no_context_takeover\t"])
        XCTAssertEqual(agreed?.serverMaxWindowBits, 12)
    }

    func testResponseRenegotiatesToItself() {
        for header in ["permessage-deflate", "permessage-deflate; server_max_window_bits=9"] {
            guard let agreed = PerMessageDeflateNegotiation.negotiate([header]) else { return XCTFail(header) }
            XCTAssertEqual(PerMessageDeflateNegotiation.negotiate([agreed.responseHeader]), agreed)
        }
    }

    func testTokenizer() {
        XCTAssertEqual(
            WebSocketExtensionOffer.parse(#"a; b=1; c="d", , e"#),
            [
                WebSocketExtensionOffer(name: "a", parameters: [.init(name: "b", value: "1"), .init(name: "c", value: "d")]),
                WebSocketExtensionOffer(name: "e", parameters: []),
            ])
        XCTAssertEqual(WebSocketExtensionOffer.parse("a; =, b"), [nil, WebSocketExtensionOffer(name: "b", parameters: [])])
        XCTAssertEqual(WebSocketExtensionOffer.parse("a" + String(repeating: "; p", count: 17)), [nil])
        XCTAssertEqual(WebSocketExtensionOffer.parse("é"), [nil])
    }

    /// Random short strings over the grammar's alphabet never trap.
    func testRandomHeadersNeverTrap() {
        var rng = SplitMix64(seed: 7)
        let alphabet = Array(#"permessage-deflate;=, "\x_9"#)
        for _ in 0..<20_000 {
            let header = String((0..<Int.random(in: 0...24, using: &rng)).map { _ in alphabet[Int.random(in: 0..<alphabet.count, using: &rng)] })
            if let agreed = PerMessageDeflateNegotiation.negotiate([header]) {
                XCTAssertEqual(PerMessageDeflateNegotiation.negotiate([agreed.responseHeader]), agreed)
            }
        }
    }
}
