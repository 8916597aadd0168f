/// The bytes of one WebSocket frame header as they arrive (2 to 14 of them), kept inline.
///
/// The frame scanner and the text validator each follow every socket's stream; a heap array
/// here was two allocations (~130 bytes with malloc's overhead) in every socket's reader.
struct WebSocketHeaderBytes: Sendable {
    private var bytes = InlineArray<14, UInt8>(repeating: 0)
    private var count: UInt8 = 0

    /// Takes the next header byte; `true` once the header is complete (its length follows from
    /// the first two bytes: 2, 4 or 10, plus 4 for the mask key). Call `reset()` before the next.
    mutating func append(_ byte: UInt8) -> Bool {
        // Complete already (the caller did not reset): stays so. Otherwise `count` < length ≤ 14.
        if count >= 2, Int(count) >= length { return true }
        bytes[Int(count)] = byte
        count += 1
        guard count >= 2 else { return false }
        return Int(count) == length
    }

    mutating func reset() { count = 0 }

    /// The full header length, from the first two bytes.
    private var length: Int {
        let base: Int
        switch bytes[1] & 0x7F {
        case 126: base = 4
        case 127: base = 10
        default: base = 2
        }
        return base + (isMasked ? 4 : 0)
    }

    /// FIN, RSV and opcode.
    var first: UInt8 { bytes[0] }
    var opcode: UInt8 { bytes[0] & 0x0F }
    var isMasked: Bool { bytes[1] & 0x80 != 0 }

    /// The declared payload length (of a complete header).
    var payloadLength: UInt64 {
        switch bytes[1] & 0x7F {
        case 126:
            return UInt64(bytes[2]) << 8 | UInt64(bytes[3])
        case 127:
            var value: UInt64 = 0
            for index in 2..<10 { value = value << 8 | UInt64(bytes[index]) }
            return value
        case let short:
            return UInt64(short)
        }
    }

    /// The masking key (the header's last four bytes) of a complete masked header.
    var maskKey: (UInt8, UInt8, UInt8, UInt8) {
        let k = Int(count) - 4
        guard isMasked, k >= 2 else { return (0, 0, 0, 0) }
        return (bytes[k], bytes[k + 1], bytes[k + 2], bytes[k + 3])
    }
}
