/// A Redis stream entry id, `ms-seq`, ordered as Redis orders them.
package struct ReceiptStreamID: Comparable, Hashable, Sendable, CustomStringConvertible {
    package var ms: Int64
    package var seq: Int64

    package static let zero = ReceiptStreamID(ms: 0, seq: 0)

    package init(ms: Int64, seq: Int64) {
        self.ms = ms
        self.seq = seq
    }

    /// `nil` unless `text` is `digits-digits` (what Redis returns; anything else read from
    /// Redis or a file is refused rather than trusted).
    package init?(_ text: String) {
        let parts = text.split(separator: "-", omittingEmptySubsequences: false)
        guard parts.count == 2, let ms = Int64(parts[0]), let seq = Int64(parts[1]), ms >= 0, seq >= 0 else { return nil }
        self.init(ms: ms, seq: seq)
    }

    package var description: String { "\(ms)-\(seq)" }

    /// The cluster cursor of the entry: `ms · 65536 + seq` (below 2^53, exact in JSON); the
    /// mapping keeps the order.
    package var gid: Int64 { ms * 65_536 + min(seq, 65_535) }

    package static func < (a: ReceiptStreamID, b: ReceiptStreamID) -> Bool {
        (a.ms, a.seq) < (b.ms, b.seq)
    }
}
