/// One event loop's permessage-deflate codecs: one inflater for every socket's messages and one
/// deflater per server window size. One at a time is enough: the loop is single-threaded. Kept by
/// the loop's `LoopPartition`.
struct PartitionCodecs {
    let inflater = MessageInflater()
    private var deflaters: [Int: MessageDeflater] = [:]

    /// A deflater for clients that limited the server's window (`server_max_window_bits`).
    mutating func deflater(windowBits: Int) -> MessageDeflater {
        if let d = deflaters[windowBits] { return d }
        let d = MessageDeflater(windowBits: windowBits)
        deflaters[windowBits] = d
        return d
    }
}
