// Shared by the fuzz targets (compiled into each with RelayCore): how a failing input is shown.

/// The input as hex, the first 8 KiB of it.
func fuzzHex(_ bytes: [UInt8]) -> String {
    let hexDigits = Array("0123456789abcdef".utf8)
    var out: [UInt8] = []
    for b in bytes.prefix(8192) {
        out.append(hexDigits[Int(b >> 4)])
        out.append(hexDigits[Int(b & 0xF)])
    }
    return String(decoding: out, as: UTF8.self) + (bytes.count > 8192 ? "… (first 8192 bytes)" : "")
}

/// Bytes as an escaped string, the first 512 of them.
func fuzzShow<C: Collection>(_ bytes: C) -> String where C.Element == UInt8 {
    let shown = bytes.prefix(512)
    let text = String(decoding: shown, as: UTF8.self).debugDescription
    return bytes.count > shown.count ? "\(text)… (\(bytes.count) bytes)" : text
}
