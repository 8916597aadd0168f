import XCTest
@testable import RelayCore

final class OriginPolicyTests: XCTestCase {
    let none = OriginPolicy(allowed: [])

    func testNativeClientsPassByDefault() {
        XCTAssertTrue(none.allows(origin: nil, host: "relay.example:8080"), "no Origin: a native app or a server")
        // Starscream (socket.io-client-swift) sends Origin: ws(s)://host:port built from the URL.
        XCTAssertTrue(none.allows(origin: "ws://127.0.0.1:8080", host: "127.0.0.1:8080"))
        XCTAssertTrue(none.allows(origin: "wss://chat.example", host: "relay.example"))
        XCTAssertTrue(none.allows(origin: "WSS://Chat.Example", host: nil))
    }

    func testTheRelaysOwnHostPasses() {
        XCTAssertTrue(none.allows(origin: "http://127.0.0.1:8080", host: "127.0.0.1:8080"))
        XCTAssertTrue(none.allows(origin: "https://relay.example", host: "relay.example"))
        XCTAssertTrue(none.allows(origin: "https://relay.example:443", host: "relay.example"))
        XCTAssertTrue(none.allows(origin: "https://relay.example", host: "Relay.Example:443"))
        XCTAssertFalse(none.allows(origin: "https://relay.example:8443", host: "relay.example"))
        XCTAssertFalse(none.allows(origin: "http://relay.example.evil.example", host: "relay.example"))
    }

    func testTheRelaysOwnHostOnlyAsHttpsWhenItServesTLS() {
        let tls = OriginPolicy(allowed: [], secure: true)
        XCTAssertTrue(tls.allows(origin: "https://relay.example", host: "relay.example"))
        XCTAssertFalse(tls.allows(origin: "http://relay.example", host: "relay.example"), "a plain-http page on the relay's name is another origin")
        XCTAssertFalse(tls.allows(origin: "ftp://relay.example", host: "relay.example"))
        XCTAssertFalse(none.allows(origin: "ftp://relay.example", host: "relay.example"))
        XCTAssertFalse(none.allows(origin: "file://relay.example", host: "relay.example"))
        XCTAssertTrue(tls.allows(origin: "wss://relay.example", host: "relay.example"), "native clients still pass")
    }

    func testCrossSiteBrowserOriginsAreRefusedUnlessAllowListed() {
        XCTAssertFalse(none.allows(origin: "https://evil.example", host: "relay.example"))
        XCTAssertFalse(none.allows(origin: "null", host: "relay.example"))
        XCTAssertFalse(none.allows(origin: "", host: "relay.example"))
        XCTAssertFalse(none.allows(origin: "https://evil.example/path", host: "evil.example"))
        XCTAssertFalse(none.allows(origin: "https://user@relay.example", host: "relay.example"))
        let list = OriginPolicy(allowed: ["https://App.Example"])
        XCTAssertTrue(list.allows(origin: "https://app.example", host: "relay.example"))
        XCTAssertFalse(list.allows(origin: "https://app.example.evil.example", host: "relay.example"))
        XCTAssertTrue(OriginPolicy(allowed: ["*"]).allows(origin: "https://anything.example", host: nil))
    }
}
