// libFuzzer target: WebSocketFrameScanner, the pre-authentication frame-size guard.
//
// Input: the first two bytes choose the limit (0…65535) and the chunk size used to feed the
// rest (1…256 bytes). The rest is a client byte stream. Checks:
// - No trap, whatever the bytes (declared lengths up to 2^64 − 1 included).
// - The verdict does not depend on how the stream is cut: whole at once, in chunks, and byte
//   by byte give the same first `tooLarge` (or `ok`).
// - It agrees with a reference written here that walks the frames of the whole buffer with
//   plain index arithmetic: the first frame header whose declared length exceeds the limit.

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    guard size >= 2 else { return 0 }
    let raw = Array(UnsafeBufferPointer(start: data, count: size))
    let limit = Int(raw[0]) << 8 | Int(raw[1])
    let chunk = Int(raw[1] & 0xFF) + 1
    // Frame headers are at most 14 bytes: 4 KiB of stream exercises every path and keeps runs fast.
    let stream = Array(raw.dropFirst(2).prefix(4096))

    var whole = WebSocketFrameScanner(limit: limit)
    let a = whole.scan(stream)

    var chunked = WebSocketFrameScanner(limit: limit)
    var b = WebSocketFrameScanner.Verdict.ok
    var start = 0
    while start < stream.count, b == .ok {
        let end = min(stream.count, start + chunk)
        b = chunked.scan(stream[start..<end])
        start = end
    }

    var single = WebSocketFrameScanner(limit: limit)
    var c = WebSocketFrameScanner.Verdict.ok
    for byte in stream where c == .ok { c = single.scan(CollectionOfOne(byte)) }

    let expected = reference(stream, limit: UInt64(limit))
    guard a == expected, b == expected, c == expected else {
        fatalError("whole \(a), chunked(\(chunk)) \(b), bytewise \(c), reference \(expected) for limit \(limit), stream \(stream)")
    }
    return 0
}

private func reference(_ bytes: [UInt8], limit: UInt64) -> WebSocketFrameScanner.Verdict {
    var i = 0
    while i + 2 <= bytes.count {
        let lengthCode = bytes[i + 1] & 0x7F
        let masked = bytes[i + 1] & 0x80 != 0
        var headerLength = 2
        var length = UInt64(lengthCode)
        if lengthCode == 126 {
            headerLength = 4
            guard i + 4 <= bytes.count else { return .ok }
            length = UInt64(bytes[i + 2]) << 8 | UInt64(bytes[i + 3])
        } else if lengthCode == 127 {
            headerLength = 10
            guard i + 10 <= bytes.count else { return .ok }
            length = 0
            for k in 2..<10 { length = length << 8 | UInt64(bytes[i + k]) }
        }
        if masked { headerLength += 4 }
        guard i + headerLength <= bytes.count else { return .ok }
        if length > limit { return .tooLarge(declared: length) }
        // The payload may run past the end of the buffer: then no further header is complete.
        let remaining = UInt64(bytes.count - i - headerLength)
        guard length < remaining else { return .ok }
        i += headerLength + Int(length)
    }
    return .ok
}
