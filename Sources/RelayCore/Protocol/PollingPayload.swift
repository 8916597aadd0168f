/// An Engine.IO v4 long-polling body: packets joined by the record separator `0x1E`, each a
/// text packet or `b<base64>` (a binary attachment). The split is the whole parser; every
/// packet is then fed to `EngineSession.receive(_:from: .polling, …)`, which checks it.
///
/// Packets are found one at a time, as slices of the body: a body of a million separators
/// costs no array of a million slices, and the reader stops as soon as the session closes.
public struct PollingPayload: Sequence, IteratorProtocol {
    public static let separator: UInt8 = 0x1E

    private var rest: ArraySlice<UInt8>?

    /// An empty body is one empty packet (as Engine.IO reads it); empty packets between
    /// separators are kept (the session refuses them).
    public init(_ body: ArraySlice<UInt8>) {
        rest = body
    }

    public mutating func next() -> ArraySlice<UInt8>? {
        guard let body = rest else { return nil }
        guard let end = body.firstIndex(of: Self.separator) else {
            rest = nil
            return body
        }
        rest = body[body.index(after: end)...]
        return body[..<end]
    }
}
