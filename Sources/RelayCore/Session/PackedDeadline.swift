/// An optional monotonic deadline (ms) in 8 bytes: an `Int64?` takes 16 in a struct (9, padded),
/// and a session keeps six. `Int64.min` stands for none; a deadline saturated down to it is
/// kept one above, which passes just the same.
@propertyWrapper
public struct PackedDeadline: Sendable, Equatable {
    private var raw: Int64

    public init(wrappedValue: Int64?) {
        raw = Self.pack(wrappedValue)
    }

    public var wrappedValue: Int64? {
        get { raw == .min ? nil : raw }
        set { raw = Self.pack(newValue) }
    }

    private static func pack(_ value: Int64?) -> Int64 {
        guard let value else { return .min }
        return value == .min ? .min + 1 : value
    }
}
