/// A backend emit's window (`"coalesce": {"key", "windowMs"}` in the emit API, PROTOCOL §5):
/// per `key`, at most one event per `windowMs` reaches each recipient, the latest. Not to be
/// confused with an outbound queue's coalescing under backpressure (`CoalescingKey`).
public struct EmitWindow: Sendable, Equatable {
    public var key: String
    public var windowMs: Int64

    public static let windowRange: ClosedRange<Int64> = 10...60_000
    public static let maxKeyBytes = 128

    public init(key: String, windowMs: Int64) {
        self.key = key
        self.windowMs = windowMs
    }
}
