import NIOHTTP1
import RelayCore

/// What RFC 6455 §4.2.1 asks of a WebSocket opening handshake beyond what NIO's upgrader
/// checks: a `GET`, HTTP/1.1 or later, and a `Sec-WebSocket-Key` that is the base64 of 16 bytes.
enum UpgradeRequestRules {
    /// The request asks for a WebSocket (an `Upgrade: websocket` header).
    static func asksForWebSocket(_ head: HTTPRequestHead) -> Bool {
        head.headers["upgrade"].contains { $0.split(separator: ",").contains { $0.trimmingCharacters(in: " \t").lowercased() == "websocket" } }
    }

    /// Why a WebSocket upgrade request is refused, or `nil` when it is well formed (or is not
    /// an upgrade request at all).
    static func problem(_ head: HTTPRequestHead) -> String? {
        guard asksForWebSocket(head) else { return nil }
        if head.method != .GET { return "a WebSocket upgrade must be a GET request" }
        if head.version.major != 1 || head.version.minor < 1 { return "a WebSocket upgrade needs HTTP/1.1" }
        let keys = head.headers["sec-websocket-key"]
        if keys.count != 1 || !WebSocketKey.isValid(keys[0]) { return "Sec-WebSocket-Key must be the base64 encoding of 16 bytes" }
        return nil
    }

    static func isAcceptable(_ head: HTTPRequestHead) -> Bool { problem(head) == nil }
}

extension Substring {
    fileprivate func trimmingCharacters(in set: String) -> Substring {
        var s = self
        while let f = s.first, set.contains(f) { s.removeFirst() }
        while let l = s.last, set.contains(l) { s.removeLast() }
        return s
    }
}
