import NIOCore
import NIOEmbedded
import NIOWebSocket
import RelayCore
import XCTest

@testable import RelayServer

/// A token's lifetime on a live socket, with the harness's injected clock.
final class TokenLifetimeTests: XCTestCase {
    /// The harness's wall clock, in seconds.
    func nowSeconds(_ h: Harness) -> Int64 { h.relay.hub.clock.wallMs() / 1000 }

    func token(_ user: String, expiresIn: Int64, issuedAgo: Int64 = 0, rooms: String = "conversation:*", _ h: Harness) -> String {
        "jwt:\(user):\(nowSeconds(h) + expiresIn):\(nowSeconds(h) - issuedAgo):\(rooms)"
    }

    /// Moves time by `ms` while the client answers every ping (so only the token can end it);
    /// returns what the socket got meanwhile, pings and pongs aside.
    func live(_ h: Harness, _ s: Session, ms: Int64) throws -> [WebSocketFrame] {
        var left = ms
        var got: [WebSocketFrame] = []
        while left > 0 {
            let step = min(left, 5_000)
            h.advance(ms: step)
            left -= step
            for frame in try s.frames() {
                if frame.opcode == .text, String(buffer: frame.data) == "2" { try s.send("3") } else { got.append(frame) }
            }
        }
        return got
    }

    func texts(_ frames: [WebSocketFrame]) -> [String] {
        frames.filter { $0.opcode == .text }.map { String(buffer: $0.data) }
    }

    func connect(_ s: Session, _ token: String) throws {
        _ = try s.texts()
        try s.send("40{\"token\":\"\(token)\"}")
        XCTAssertTrue(try s.texts().contains { $0.hasPrefix("40{") })
    }

    func testAnExpiringTokenIsAnnouncedThenTheSocketIsClosedAtExpiryPlusLeeway() throws {
        let h = Harness { $0.auth.tokenExpiryNoticeMs = 60_000; $0.auth.jwtLeewaySeconds = 30 }
        let s = try h.session()
        try connect(s, token("alice", expiresIn: 120, h))
        XCTAssertFalse(texts(try live(h, s, ms: 59_000)).contains { $0.contains("auth:expiring") })
        let notice = texts(try live(h, s, ms: 1_000))
        XCTAssertTrue(notice.contains { $0.hasPrefix("42[\"auth:expiring\"") && $0.contains("\"expiresInMs\":90000") }, "\(notice)")
        XCTAssertFalse(try live(h, s, ms: 89_999).contains { $0.opcode == .connectionClose })
        let frames = try live(h, s, ms: 1)
        XCTAssertTrue(frames.contains { $0.opcode == .text && String(buffer: $0.data).hasPrefix("42[\"auth:expired\"") })
        var close = try XCTUnwrap(frames.first { $0.opcode == .connectionClose }).data
        XCTAssertEqual(close.readInteger(as: UInt16.self), CloseCode.tokenExpired)
        XCTAssertEqual(h.relay.hub.metrics.counterValue("relay_disconnects_total", [("reason", "token_expired")]), 1)
    }

    func testATokenAlreadyInsideTheNoticeIsAnnouncedAtOnce() throws {
        let h = Harness { $0.auth.tokenExpiryNoticeMs = 60_000 }
        let s = try h.session()
        _ = try s.texts()
        try s.send("40{\"token\":\"\(token("alice", expiresIn: 10, h))\"}")
        h.advance(ms: 0)
        let texts = try s.texts()
        XCTAssertTrue(texts.first?.hasPrefix("40{") ?? false)
        XCTAssertTrue(texts.contains { $0.contains("auth:expiring") }, "\(texts)")
    }

    func testRefreshExtendsTheSocketAndLeavesRoomsNoLongerAllowed() throws {
        let h = Harness { $0.auth.tokenExpiryNoticeMs = 60_000; $0.auth.jwtLeewaySeconds = 0 }
        let alice = try h.session(), bob = try h.session()
        try connect(alice, token("alice", expiresIn: 120, h))
        try connect(bob, "bob")
        for s in [alice, bob] {
            try s.send("42[\"room:join\",{\"room\":\"conversation:1\"}]")
            try s.send("42[\"room:join\",{\"room\":\"conversation:2\"}]")
        }
        _ = try alice.texts()
        _ = try bob.texts()
        try alice.send("421[\"auth:refresh\",{\"token\":\"\(token("alice", expiresIn: 3600, rooms: "conversation:2", h))\"}]")
        let ack = try XCTUnwrap(try alice.texts().first { $0.hasPrefix("431") })
        XCTAssertTrue(ack.contains("\"ok\":true") && ack.contains("\"left\":[\"conversation:1\"]"), ack)
        XCTAssertTrue(try bob.texts().contains { $0.contains("presence:leave") && $0.contains("conversation:1") })
        XCTAssertFalse(h.relay.hub.rooms.rooms(of: ConnectionID(1)).contains("conversation:1"))
        let later = try live(h, alice, ms: 200_000)
        XCTAssertFalse(later.contains { $0.opcode == .connectionClose }, "the new token runs for an hour")
        XCTAssertFalse(texts(later).contains { $0.contains("auth:expiring") })
        XCTAssertEqual(h.relay.hub.metrics.counterValue("relay_token_refreshes_total", [("result", "ok")]), 1)
    }

    func testRefreshWithAnotherUsersOrABadTokenIsRefused() throws {
        let h = Harness()
        let alice = try h.session()
        try connect(alice, token("alice", expiresIn: 120, h))
        try alice.send("421[\"auth:refresh\",{\"token\":\"\(token("mallory", expiresIn: 3600, h))\"}]")
        XCTAssertTrue(try alice.texts().contains { $0.hasPrefix("431") && $0.contains("token_subject_mismatch") })
        try alice.send("422[\"auth:refresh\",{\"token\":\"garbage\"}]")
        XCTAssertTrue(try alice.texts().contains { $0.hasPrefix("432") && $0.contains("token_bad_signature") })
        try alice.send("423[\"auth:refresh\",{}]")
        XCTAssertTrue(try alice.texts().contains { $0.hasPrefix("433") && $0.contains("invalid_payload") })
        XCTAssertEqual(h.relay.hub.metrics.counterValue("relay_token_refreshes_total", [("result", "refused")]), 2)
    }

    func testTheBackendEndsEverySessionAndRevokesOlderTokens() throws {
        let h = Harness()
        let phone = try h.session(), laptop = try h.session(), bob = try h.session()
        let old = token("alice", expiresIn: 3600, issuedAgo: 10, h)
        try connect(phone, old)
        try connect(laptop, old)
        try connect(bob, "bob")
        let answer = UserDisconnectEndpoint(revocations: h.relay.hub.revocations).handle(user: "alice", body: Array("{\"revoke\":true}".utf8))
        XCTAssertEqual(answer.status, .ok)
        XCTAssertTrue(String(decoding: answer.body, as: UTF8.self).contains("\"disconnected\":2"))
        XCTAssertEqual(try phone.closeCode(), CloseCode.kicked)
        XCTAssertEqual(try laptop.closeCode(), CloseCode.kicked)
        XCTAssertNil(try bob.closeCode())
        // The old token no longer connects; one issued after the revocation does.
        let again = try h.session()
        _ = try again.texts()
        try again.send("40{\"token\":\"\(old)\"}")
        XCTAssertTrue(try again.texts().contains { $0.hasPrefix("44") && $0.contains("token_revoked") })
        h.advance(ms: 1_000)
        try connect(try h.session(), token("alice", expiresIn: 3600, h))
        XCTAssertEqual(UserDisconnectEndpoint(revocations: h.relay.hub.revocations).handle(user: "cafe\u{301}", body: []).status, .badRequest)
        XCTAssertEqual(UserDisconnectEndpoint.user(inPath: "/api/v1/users/a%3Ab/disconnect"), "a:b")
        XCTAssertNil(UserDisconnectEndpoint.user(inPath: "/api/v1/users/a/b/disconnect"))
    }
}
