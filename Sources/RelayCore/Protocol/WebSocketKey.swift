/// The `Sec-WebSocket-Key` request header (RFC 6455 §4.2.1, item 5).
public enum WebSocketKey {
    /// True iff `value`, without leading and trailing optional whitespace (space, tab), is the
    /// standard base64 encoding (RFC 4648 §4, `+` `/` alphabet, padded) of exactly 16 bytes.
    ///
    /// 16 bytes encode as 22 alphabet characters followed by `==`. The 4 unused low bits of the
    /// 22nd character need not be zero: RFC 6455 only asks that the value decode to 16 bytes,
    /// and lenient decoders ignore those bits.
    public static func isValid(_ value: String) -> Bool {
        var bytes = Substring(value).utf8[...]
        while let first = bytes.first, first == 0x20 || first == 0x09 { bytes = bytes.dropFirst() }
        while let last = bytes.last, last == 0x20 || last == 0x09 { bytes = bytes.dropLast() }
        guard bytes.count == 24 else { return false }
        var position = 0
        for byte in bytes {
            if position < 22 {
                guard isBase64Alphabet(byte) else { return false }
            } else {
                guard byte == UInt8(ascii: "=") else { return false }
            }
            position += 1
        }
        return true
    }

    static func isBase64Alphabet(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
            UInt8(ascii: "+"), UInt8(ascii: "/"):
            return true
        default:
            return false
        }
    }
}
