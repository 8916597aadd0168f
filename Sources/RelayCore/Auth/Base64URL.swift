/// Strict base64url (RFC 4648 §5) as JWS uses it (RFC 7515 §2): the `-` `_` alphabet, no
/// padding, no whitespace.
public enum Base64URL {
    /// Decodes `input`, or returns `nil` for anything that is not the canonical unpadded
    /// base64url encoding of some bytes: a byte outside the alphabet (`=` included), a length of
    /// 1 modulo 4, non-zero unused bits in the last character, or more than `maxInputBytes`
    /// bytes of input. Work and memory are linear in the input, which the limit bounds.
    public static func decode<Input: Collection>(_ input: Input, maxInputBytes: Int = 16_384) -> [UInt8]? where Input.Element == UInt8 {
        guard input.count <= maxInputBytes else { return nil }
        var out: [UInt8] = []
        out.reserveCapacity(input.count / 4 * 3 + 2)
        var accumulator: UInt32 = 0
        var bits = 0
        for byte in input {
            guard let sextet = value(of: byte) else { return nil }
            accumulator = accumulator << 6 | UInt32(sextet)
            bits += 6
            if bits >= 8 {
                bits -= 8
                out.append(UInt8(truncatingIfNeeded: accumulator >> bits))
                accumulator &= (1 << bits) - 1
            }
        }
        // 0, 2 or 4 bits may be left over and must be zero; 6 means a length of 1 modulo 4.
        guard bits < 6, accumulator == 0 else { return nil }
        return out
    }

    /// Encodes `bytes` as unpadded base64url.
    public static func encode<Bytes: Sequence>(_ bytes: Bytes) -> String where Bytes.Element == UInt8 {
        var out: [UInt8] = []
        var accumulator: UInt32 = 0
        var bits = 0
        for byte in bytes {
            accumulator = accumulator << 8 | UInt32(byte)
            bits += 8
            while bits >= 6 {
                bits -= 6
                out.append(alphabet(Int(truncatingIfNeeded: accumulator >> bits) & 0x3F))
            }
            accumulator &= (1 << bits) - 1
        }
        if bits > 0 { out.append(alphabet(Int(truncatingIfNeeded: accumulator << (6 - bits)) & 0x3F)) }
        return String(decoding: out, as: UTF8.self)
    }

    static func value(of byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "A")...UInt8(ascii: "Z"): return byte - UInt8(ascii: "A")
        case UInt8(ascii: "a")...UInt8(ascii: "z"): return byte - UInt8(ascii: "a") + 26
        case UInt8(ascii: "0")...UInt8(ascii: "9"): return byte - UInt8(ascii: "0") + 52
        case UInt8(ascii: "-"): return 62
        case UInt8(ascii: "_"): return 63
        default: return nil
        }
    }

    static func alphabet(_ sextet: Int) -> UInt8 {
        switch sextet {
        case 0..<26: return UInt8(ascii: "A") + UInt8(truncatingIfNeeded: sextet)
        case 26..<52: return UInt8(ascii: "a") + UInt8(truncatingIfNeeded: sextet - 26)
        case 52..<62: return UInt8(ascii: "0") + UInt8(truncatingIfNeeded: sextet - 52)
        case 62: return UInt8(ascii: "-")
        default: return UInt8(ascii: "_")
        }
    }
}
