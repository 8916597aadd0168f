/// Byte checks for text that is usually plain ASCII (event names, keys, most payloads).
public enum ASCII {
    /// Whether every byte is below 0x80, so the bytes are valid UTF-8 as they are and need no
    /// validation. An OR over the bytes, which the compiler vectorises.
    @inlinable
    public static func isASCII(_ bytes: UnsafeBufferPointer<UInt8>) -> Bool {
        var high: UInt8 = 0
        for byte in bytes { high |= byte }
        return high < 0x80
    }
}
