import NIOCore
import NIOWebSocket

/// What the scenario connections (`LoadConnection`, `ChatConnection`) share of reading Socket.IO
/// over WebSocket: which packet a text frame is, its ack id, whether an ack says ok, the fields
/// they read, and the control frames. Tiny scanners: the generator must stay cheap. Tolerant of
/// what stock servers send (python-socketio puts a space after each `:` and `,`).
enum SocketIOText {
    /// The Engine.IO / Socket.IO packet a text frame carries, as far as a client needs it.
    enum Packet {
        /// Engine.IO ping (`2`): answer `3`.
        case ping
        /// Engine.IO open (`0`): send the CONNECT.
        case open
        /// Socket.IO CONNECT answer (`40`).
        case connected
        /// Socket.IO EVENT (`42…`).
        case event
        /// Socket.IO ACK (`43<id>…`).
        case ack(id: Int64)
        /// Socket.IO CONNECT_ERROR (`44`).
        case connectError
        case other
    }

    static func packet(_ b: UnsafeBufferPointer<UInt8>) -> Packet {
        guard let first = b.first else { return .other }
        switch first {
        case UInt8(ascii: "2"): return .ping
        case UInt8(ascii: "0"): return .open
        case UInt8(ascii: "4") where b.count >= 2:
            switch b[1] {
            case UInt8(ascii: "0"): return .connected
            case UInt8(ascii: "2"): return .event
            case UInt8(ascii: "3"): return .ack(id: digits(b, from: 2))
            case UInt8(ascii: "4"): return .connectError
            default: return .other
            }
        default: return .other
        }
    }

    /// An ack's `{"ok":true…}`.
    static func isOK(_ b: UnsafeBufferPointer<UInt8>) -> Bool {
        contains(b, "\"ok\":true") || contains(b, "\"ok\": true")
    }

    /// Answers a WebSocket ping; a close frame closes the channel and gives its code. `nil` for
    /// anything else.
    static func control(_ frame: WebSocketFrame, context: ChannelHandlerContext) -> UInt16? {
        switch frame.opcode {
        case .connectionClose:
            var d = frame.data
            let code = d.readInteger(as: UInt16.self) ?? 1005
            context.close(promise: nil)
            return code
        case .ping:
            context.writeAndFlush(NIOAny(WebSocketFrame(fin: true, opcode: .pong, maskKey: .random(), data: frame.data)), promise: nil)
            return nil
        default:
            return nil
        }
    }

    // MARK: Scanners

    static func hasPrefix(_ b: UnsafeBufferPointer<UInt8>, from: Int, _ s: StaticString) -> Bool {
        let n = s.utf8CodeUnitCount
        guard b.count >= from + n else { return false }
        for i in 0..<n where b[from + i] != s.utf8Start[i] { return false }
        return true
    }

    /// The index just past the first `s` in `b`.
    static func find(_ b: UnsafeBufferPointer<UInt8>, _ s: StaticString) -> Int? {
        let n = s.utf8CodeUnitCount
        guard b.count >= n else { return nil }
        var i = 0
        while i + n <= b.count {
            if b[i] == s.utf8Start[0] && hasPrefix(b, from: i, s) { return i + n }
            i += 1
        }
        return nil
    }

    static func contains(_ b: UnsafeBufferPointer<UInt8>, _ s: StaticString) -> Bool { find(b, s) != nil }

    /// The integer after `key` (and after the literal `after`, inside a string: `"chat-12"`).
    static func int(_ b: UnsafeBufferPointer<UInt8>, _ key: StaticString, after prefix: StaticString = "") -> Int64? {
        guard var i = find(b, key) else { return nil }
        while i < b.count, b[i] == UInt8(ascii: " ") { i += 1 }
        if prefix.utf8CodeUnitCount > 0 {
            guard i < b.count, b[i] == UInt8(ascii: "\""), hasPrefix(b, from: i + 1, prefix) else { return nil }
            i += 1 + prefix.utf8CodeUnitCount
        }
        guard i < b.count, b[i] >= 48, b[i] <= 57 else { return nil }
        return digits(b, from: i)
    }

    /// The string after `key` (no escapes: the generator's own ids and codes have none).
    static func string(_ b: UnsafeBufferPointer<UInt8>, _ key: StaticString) -> String? {
        guard var i = find(b, key) else { return nil }
        while i < b.count, b[i] == UInt8(ascii: " ") { i += 1 }
        guard i < b.count, b[i] == UInt8(ascii: "\"") else { return nil }
        i += 1
        var end = i
        while end < b.count, b[end] != UInt8(ascii: "\"") { end += 1 }
        return String(decoding: UnsafeBufferPointer(rebasing: b[i..<end]), as: UTF8.self)
    }

    /// The decimal digits from `from` (0 when there are none).
    private static func digits(_ b: UnsafeBufferPointer<UInt8>, from: Int) -> Int64 {
        var i = from
        var v: Int64 = 0
        while i < b.count, b[i] >= 48, b[i] <= 57 {
            v = v &* 10 &+ Int64(b[i] - 48)
            i += 1
        }
        return v
    }
}
