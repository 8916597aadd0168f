// libFuzzer target: FragmentAssembly, the reassembly of fragmented WebSocket messages.
//
// Input: byte 0 picks the fragment sizes' scale, the rest is the message; each following byte of
// a split script (taken cyclically from the message itself) cuts the next fragment, empty
// fragments included (the continuation flood). Checks:
// - The reassembled bytes are the message, whatever the split.
// - The bytes copied (written or moved when the array grew) stay linear in the message: at most
//   3 × its size + a constant, however many fragments, so no split makes reassembly quadratic.
// - A limit below the message refuses the fragment that would pass it, and nothing after.

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    guard size >= 2 else { return 0 }
    let raw = Array(UnsafeBufferPointer(start: data, count: size))
    let scale = Int(raw[0] % 8)
    // Repeat the input to reach messages of up to ~1 MB: quadratic copying shows at that size.
    let repeats = min(1 << (scale * 2), max(1, 1_000_000 / (raw.count - 1)))
    var message: [UInt8] = []
    message.reserveCapacity((raw.count - 1) * repeats)
    for _ in 0..<repeats { message.append(contentsOf: raw.dropFirst()) }
    let script = Array(raw.dropFirst())
    var cuts: [Int] = []
    var at = 0
    var i = 0
    while at < message.count {
        // 0 makes an empty fragment; sizes grow with the scale so big messages stay fast.
        let step = Int(script[i % script.count] % 17) * (1 << scale)
        cuts.append(min(step, message.count - at))
        at += cuts[cuts.count - 1]
        i += 1
        if cuts.count > 200_000 { break }
    }
    guard at == message.count else { return 0 }

    let firstLength = cuts.first ?? 0
    var assembly = FragmentAssembly(first: Array(message[0..<firstLength]))
    var offset = firstLength
    for length in cuts.dropFirst() {
        guard assembly.append(message[offset..<offset + length], limit: message.count) else {
            fatalError("refused a fragment within the limit at \(offset)+\(length) of \(message.count)")
        }
        offset += length
    }
    guard assembly.bytes == message else { fatalError("reassembled \(assembly.count) bytes differ from the message of \(message.count)") }
    guard assembly.copiedBytes <= 3 * message.count + 64 else {
        fatalError("copied \(assembly.copiedBytes) bytes for a message of \(message.count) in \(cuts.count) fragments")
    }

    // A limit one below the message: the fragment that passes it is refused, nothing is added.
    if message.count > 1, cuts.count > 1 {
        let limit = message.count - 1
        var limited = FragmentAssembly(first: Array(message[0..<firstLength]))
        var offset = firstLength
        var refused = false
        for length in cuts.dropFirst() {
            let before = limited.count
            if !limited.append(message[offset..<offset + length], limit: limit) {
                guard before + length > limit, limited.count == before else { fatalError("refused within the limit, or appended when refusing") }
                refused = true
                break
            }
            offset += length
        }
        guard refused || firstLength > limit else { fatalError("a message over the limit was taken whole") }
    }
    return 0
}
