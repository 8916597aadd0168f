/// Redis Cluster's key → slot mapping: CRC16 (XMODEM) of the key, or of its hash tag — the
/// part between the first `{` and the next `}` when that part is not empty — modulo 16384.
/// Keys that share a tag share a slot, so one script or transaction may touch them all.
public enum RedisHashSlot {
    public static let count = 16_384

    public static func slot(of key: String) -> Int {
        slot(of: Array(key.utf8)[...])
    }

    public static func slot(of key: ArraySlice<UInt8>) -> Int {
        Int(crc16(hashed(key)) & 0x3FFF)
    }

    /// The bytes that are hashed: the tag when there is a non-empty one, else the whole key.
    static func hashed(_ key: ArraySlice<UInt8>) -> ArraySlice<UInt8> {
        guard let open = key.firstIndex(of: UInt8(ascii: "{")) else { return key }
        let rest = key[(open + 1)...]
        guard let close = rest.firstIndex(of: UInt8(ascii: "}")), close > rest.startIndex else { return key }
        return key[(open + 1)..<close]
    }

    static func crc16(_ bytes: ArraySlice<UInt8>) -> UInt16 {
        var crc: UInt16 = 0
        for byte in bytes {
            crc ^= UInt16(byte) << 8
            for _ in 0..<8 {
                crc = (crc & 0x8000) != 0 ? (crc << 1) ^ 0x1021 : crc << 1
            }
        }
        return crc
    }
}
