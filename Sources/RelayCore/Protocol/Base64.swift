/// Standard base64 (RFC 4648 §4: `+` `/` alphabet, `=` padding), as Engine.IO long-polling
/// carries binary messages: `b<base64>`. Not base64url: see `Base64URL` for JWTs.
public enum Base64 {
    private static let alphabet: [UInt8] = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8)

    /// The length of the padded encoding of `count` bytes.
    public static func encodedLength(of count: Int) -> Int { (count + 2) / 3 * 4 }

    /// Appends the padded encoding of `bytes` to `out`.
    public static func encode<Bytes: Collection>(_ bytes: Bytes, into out: inout [UInt8]) where Bytes.Element == UInt8 {
        out.reserveCapacity(out.count + encodedLength(of: bytes.count))
        var i = bytes.startIndex
        var remaining = bytes.count
        while remaining >= 3 {
            let b0 = bytes[i]
            let b1 = bytes[bytes.index(after: i)]
            let b2 = bytes[bytes.index(i, offsetBy: 2)]
            i = bytes.index(i, offsetBy: 3)
            remaining -= 3
            out.append(alphabet[Int(b0 >> 2)])
            out.append(alphabet[Int((b0 & 0x03) << 4 | b1 >> 4)])
            out.append(alphabet[Int((b1 & 0x0F) << 2 | b2 >> 6)])
            out.append(alphabet[Int(b2 & 0x3F)])
        }
        if remaining == 1 {
            let b0 = bytes[i]
            out.append(alphabet[Int(b0 >> 2)])
            out.append(alphabet[Int((b0 & 0x03) << 4)])
            out.append(UInt8(ascii: "="))
            out.append(UInt8(ascii: "="))
        } else if remaining == 2 {
            let b0 = bytes[i]
            let b1 = bytes[bytes.index(after: i)]
            out.append(alphabet[Int(b0 >> 2)])
            out.append(alphabet[Int((b0 & 0x03) << 4 | b1 >> 4)])
            out.append(alphabet[Int((b1 & 0x0F) << 2)])
            out.append(UInt8(ascii: "="))
        }
    }

    /// The padded encoding of `bytes`.
    public static func encode<Bytes: Collection>(_ bytes: Bytes) -> [UInt8] where Bytes.Element == UInt8 {
        var out: [UInt8] = []
        encode(bytes, into: &out)
        return out
    }

    /// How many bytes `input` decodes to if it is valid, computed from its length and padding
    /// alone (so a caller can refuse an oversized message before decoding it); `nil` when the
    /// length cannot be that of an encoding.
    public static func decodedLength<Input: BidirectionalCollection>(of input: Input) -> Int? where Input.Element == UInt8 {
        var padding = 0
        var end = input.endIndex
        while padding < 2, end > input.startIndex, input[input.index(before: end)] == UInt8(ascii: "=") {
            end = input.index(before: end)
            padding += 1
        }
        let count = input.count
        if padding > 0 {
            guard count % 4 == 0 else { return nil }
            return count / 4 * 3 - padding
        }
        switch count % 4 {
        case 0: return count / 4 * 3
        case 2: return count / 4 * 3 + 1
        case 3: return count / 4 * 3 + 2
        default: return nil
        }
    }

    /// Decodes `input`, or returns `nil` unless it is the canonical encoding of some bytes:
    /// only alphabet characters, then at most two `=` that complete the last group of four (the
    /// padding may be left out: `QQ` and `QQ==` both decode), no whitespace, and zero unused
    /// bits in the last character. Work and memory are linear in the input.
    public static func decode<Input: BidirectionalCollection>(_ input: Input) -> [UInt8]? where Input.Element == UInt8 {
        guard let length = decodedLength(of: input) else { return nil }
        var out: [UInt8] = []
        out.reserveCapacity(length)
        var accumulator: UInt32 = 0
        var bits = 0
        for byte in input {
            if byte == UInt8(ascii: "=") { break }  // only trailing padding: decodedLength checked
            guard let sextet = value(of: byte) else { return nil }
            accumulator = accumulator << 6 | UInt32(sextet)
            bits += 6
            if bits >= 8 {
                bits -= 8
                out.append(UInt8(truncatingIfNeeded: accumulator >> bits))
                accumulator &= (1 << bits) - 1
            }
        }
        guard bits < 6, accumulator == 0, out.count == length else { return nil }
        return out
    }

    static func value(of byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "A")...UInt8(ascii: "Z"): return byte - UInt8(ascii: "A")
        case UInt8(ascii: "a")...UInt8(ascii: "z"): return byte - UInt8(ascii: "a") + 26
        case UInt8(ascii: "0")...UInt8(ascii: "9"): return byte - UInt8(ascii: "0") + 52
        case UInt8(ascii: "+"): return 62
        case UInt8(ascii: "/"): return 63
        default: return nil
        }
    }
}
