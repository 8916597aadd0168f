/// `Sec-WebSocket-Key` validation (RFC 6455 §4.2.1): the base64 encoding of 16 bytes.
public enum WebSocketKey {
    /// True when `value`, without surrounding spaces or tabs, is 24 base64 characters ending in
    /// `==` (16 bytes).
    public static func isValid(_ value: String) -> Bool {
        var bytes = Array(value.utf8)[...]
        while let f = bytes.first, f == 0x20 || f == 0x09 { bytes.removeFirst() }
        while let l = bytes.last, l == 0x20 || l == 0x09 { bytes.removeLast() }
        guard bytes.count == 24, bytes.suffix(2).allSatisfy({ $0 == UInt8(ascii: "=") }) else { return false }
        return bytes.prefix(22).allSatisfy { b in
            (0x41...0x5A).contains(b) || (0x61...0x7A).contains(b) || (0x30...0x39).contains(b) || b == UInt8(ascii: "+") || b == UInt8(ascii: "/")
        }
    }
}
