// libFuzzer target: WebSocketTextValidator, the UTF-8 check of text messages as bytes arrive.
//
// Input: byte 0 picks the chop size (1…256) and whether the message is split into fragments
// (with a ping between them) at positions taken from byte 1; the rest is a text message's
// payload (at most 4 KiB), sent as masked client frames. Checks:
// - No trap, whatever the bytes.
// - The verdict equals the standard library's: `String(validating:as: UTF8.self)` of the whole
//   payload is nil exactly when the validator refuses the stream, however it is chopped.
// - A binary message with the same bytes is never refused.

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    guard size >= 2 else { return 0 }
    let raw = Array(UnsafeBufferPointer(start: data, count: size))
    let chop = Int(raw[0]) + 1
    let split = Int(raw[1])
    let payload = Array(raw.dropFirst(2).prefix(4096))
    let mask: [UInt8] = [raw[0] ^ 0x5A, raw[1], 0xC3, 0x11]

    var stream: [UInt8] = []
    let cut = payload.isEmpty ? 0 : split % (payload.count + 1)
    if split & 1 == 1, cut > 0, cut < payload.count {
        stream += frame(0x1, Array(payload[..<cut]), fin: false, mask: mask)
        stream += frame(0x9, [1, 2, 3], fin: true, mask: mask)
        stream += frame(0x0, Array(payload[cut...]), fin: true, mask: mask)
    } else {
        stream += frame(0x1, payload, fin: true, mask: mask)
    }
    let valid = String(validating: payload, as: UTF8.self) != nil

    var validator = WebSocketTextValidator()
    var refused = false
    var start = 0
    while start < stream.count, !refused {
        let end = min(stream.count, start + chop)
        refused = stream[start..<end].withUnsafeBytes { validator.scan($0) } == .invalidUTF8
        start = end
    }
    guard refused == !valid else { fatalError("validator refused=\(refused), stdlib valid=\(valid), chop \(chop), payload \(payload)") }

    var binary = WebSocketTextValidator()
    let binaryStream = frame(0x2, payload, fin: true, mask: mask)
    guard binaryStream.withUnsafeBytes({ binary.scan($0) }) == .ok else { fatalError("a binary message was refused") }
    return 0
}

private func frame(_ opcode: UInt8, _ payload: [UInt8], fin: Bool, mask: [UInt8]) -> [UInt8] {
    var out: [UInt8] = [(fin ? 0x80 : 0) | opcode]
    if payload.count < 126 {
        out.append(0x80 | UInt8(payload.count))
    } else {
        out += [0x80 | 126, UInt8(payload.count >> 8), UInt8(payload.count & 0xFF)]
    }
    out += mask
    for (i, byte) in payload.enumerated() { out.append(byte ^ mask[i % 4]) }
    return out
}
