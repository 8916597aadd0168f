/// The signature scheme of Relay's webhooks (docs/PROTOCOL.md §13), without the HMAC itself
/// (RelayCore has no dependencies; the server computes HMAC-SHA256 with swift-crypto):
///
///     X-Relay-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256(secret, "<t>.<body>")>
///
/// The receiver recomputes the HMAC over the same bytes, compares in constant time, and
/// refuses a `t` outside its replay window.
public enum WebhookSignature {
    /// The header carrying the signature.
    public static let header = "X-Relay-Signature"
    /// The header carrying the batch (delivery) id, the same on every attempt.
    public static let deliveryHeader = "X-Relay-Delivery"
    /// The header carrying the attempt number (1, 2, …).
    public static let attemptHeader = "X-Relay-Attempt"
    /// The replay window receivers are told to use (seconds either side of their clock).
    public static let defaultToleranceSeconds: Int64 = 300

    /// The bytes that are signed: `"<t>.<body>"`.
    public static func signedBytes(timestamp: Int64, body: [UInt8]) -> [UInt8] {
        var out = Array(String(timestamp).utf8)
        out.reserveCapacity(out.count + 1 + body.count)
        out.append(UInt8(ascii: "."))
        out.append(contentsOf: body)
        return out
    }

    /// The header value for a timestamp and an HMAC.
    public static func headerValue(timestamp: Int64, mac: some Sequence<UInt8>) -> String {
        "t=\(timestamp),v1=\(hex(mac))"
    }

    /// Lowercase hex.
    public static func hex(_ bytes: some Sequence<UInt8>) -> String {
        let digits = Array("0123456789abcdef".utf8)
        var out: [UInt8] = []
        for b in bytes {
            out.append(digits[Int(b >> 4)])
            out.append(digits[Int(b & 0x0f)])
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// A parsed header: its timestamp and every `v1` signature (hex).
    public struct Parsed: Equatable, Sendable {
        public var timestamp: Int64
        public var signatures: [String]
    }

    /// Parses `t=…,v1=…[,v1=…]`; `nil` when there is no valid `t` or no `v1`. Unknown
    /// schemes are ignored (so a future `v2` can be added beside `v1`).
    public static func parse(_ value: String) -> Parsed? {
        var t: Int64?
        var sigs: [String] = []
        for part in value.split(separator: ",") {
            let kv = part.split(separator: "=", maxSplits: 1)
            guard kv.count == 2 else { continue }
            let key = kv[0].trimmingSpaces, val = kv[1].trimmingSpaces
            if key == "t" { t = Int64(val) } else if key == "v1", !val.isEmpty { sigs.append(String(val)) }
        }
        guard let t, !sigs.isEmpty else { return nil }
        return Parsed(timestamp: t, signatures: sigs)
    }

    /// Whether a signature's timestamp is within the replay window around `now` (seconds).
    public static func isFresh(timestamp: Int64, now: Int64, toleranceSeconds: Int64 = defaultToleranceSeconds) -> Bool {
        timestamp >= now - toleranceSeconds && timestamp <= now + toleranceSeconds
    }

    /// Constant-time comparison of two hex strings (the length is not secret).
    public static func constantTimeEquals(_ a: String, _ b: String) -> Bool {
        let x = Array(a.utf8), y = Array(b.utf8)
        guard x.count == y.count else { return false }
        var diff: UInt8 = 0
        for i in 0..<x.count { diff |= x[i] ^ y[i] }
        return diff == 0
    }
}

extension Substring {
    fileprivate var trimmingSpaces: Substring {
        var s = self
        while s.first == " " { s.removeFirst() }
        while s.last == " " { s.removeLast() }
        return s
    }
}
