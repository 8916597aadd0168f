/// A position in one history stream: `<ms>-<seq>`, ordered by milliseconds then by the counter
/// within the millisecond (the shape of a Redis stream id, which it is in cluster mode).
public struct StreamOffset: Hashable, Comparable, Sendable, CustomStringConvertible {
    public var ms: UInt64
    public var seq: UInt64

    /// Before every event: an empty stream's position.
    public static let zero = StreamOffset(ms: 0, seq: 0)

    public init(ms: UInt64, seq: UInt64) {
        self.ms = ms
        self.seq = seq
    }

    /// Parses `<ms>-<seq>` (decimal, at most 20 digits each, no sign, no overflow).
    public init?(id: some StringProtocol) {
        let bytes = Array(id.utf8)
        guard let dash = bytes.firstIndex(of: UInt8(ascii: "-")),
            let ms = Self.decimal(bytes[..<dash]), let seq = Self.decimal(bytes[(dash + 1)...])
        else { return nil }
        self.ms = ms
        self.seq = seq
    }

    static func decimal(_ digits: ArraySlice<UInt8>) -> UInt64? {
        guard !digits.isEmpty, digits.count <= 20 else { return nil }
        var value: UInt64 = 0
        for d in digits {
            guard d >= UInt8(ascii: "0"), d <= UInt8(ascii: "9") else { return nil }
            let (times, o1) = value.multipliedReportingOverflow(by: 10)
            let (sum, o2) = times.addingReportingOverflow(UInt64(d - UInt8(ascii: "0")))
            guard !o1, !o2 else { return nil }
            value = sum
        }
        return value
    }

    /// `<ms>-<seq>`.
    public var description: String { "\(ms)-\(seq)" }

    /// The next offset of a stream whose last is `self`, at wall time `wallMs`: milliseconds
    /// never go back (a clock step backwards only advances the counter).
    public func next(wallMs: Int64) -> StreamOffset {
        let now = UInt64(clamping: wallMs)
        if now > ms { return StreamOffset(ms: now, seq: 0) }
        return StreamOffset(ms: ms, seq: seq &+ 1)
    }

    public static func < (a: StreamOffset, b: StreamOffset) -> Bool {
        (a.ms, a.seq) < (b.ms, b.seq)
    }
}

/// An offset as a client sees it: `<ms>-<seq>:<tag>`, the tag naming the stream (8 hex digits).
public struct WireOffset: Hashable, Sendable, CustomStringConvertible {
    public var offset: StreamOffset
    public var tag: UInt32

    public init(_ offset: StreamOffset, stream: StreamKey) {
        self.offset = offset
        self.tag = stream.tag
    }

    public init(offset: StreamOffset, tag: UInt32) {
        self.offset = offset
        self.tag = tag
    }

    /// Parses `<ms>-<seq>:<tag>`; at most 64 bytes.
    public init?(_ text: some StringProtocol) {
        guard text.utf8.count <= 64, let colon = text.lastIndex(of: ":") else { return nil }
        let hex = text[text.index(after: colon)...]
        guard hex.utf8.count == 8, let tag = UInt32(hex, radix: 16), hex.utf8.allSatisfy({ Self.isLowerHex($0) }),
            let offset = StreamOffset(id: text[..<colon])
        else { return nil }
        self.offset = offset
        self.tag = tag
    }

    private static func isLowerHex(_ b: UInt8) -> Bool {
        (b >= UInt8(ascii: "0") && b <= UInt8(ascii: "9")) || (b >= UInt8(ascii: "a") && b <= UInt8(ascii: "f"))
    }

    public var description: String {
        let hex = String(tag, radix: 16)
        return "\(offset):\(String(repeating: "0", count: 8 - hex.count))\(hex)"
    }
}
