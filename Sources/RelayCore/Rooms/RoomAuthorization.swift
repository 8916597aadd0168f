/// The `rooms` claim of a token: room names a user may join, exact or by prefix (`conversation:*`).
///
/// Matching is byte-exact: an exact pattern matches a room with the same UTF-8 bytes, a prefix
/// pattern matches a room whose UTF-8 bytes start with the prefix's bytes. Patterns and rooms
/// must be in NFC (see `Identifier`): a pattern that is not NFC is dropped, so it never matches
/// anything, and a room that is not NFC is never allowed. For NFC strings byte equality is the
/// same as `String` equality, so `exact` can stay a `Set<String>`.
///
/// Prefixes work on bytes, not Characters: `conversation:*` allows `conversation:\u{301}x`
/// (a combining mark right after the prefix is still inside it), and `conversation:e*` does not
/// allow `conversation:\u{E9}` (`é` is one precomposed scalar whose bytes do not start with `e`).
public struct RoomAuthorization: Sendable, Equatable {
    /// Patterns without a trailing `*`, matched exactly.
    public let exact: Set<String>
    /// Patterns with a trailing `*`, without it, matched as byte prefixes.
    public let prefixes: [String]

    /// Sorts `patterns` into exact names and prefixes; empty and non-NFC patterns are dropped.
    public init(patterns: [String]) {
        var exact = Set<String>()
        var prefixes: [String] = []
        for p in patterns where !p.isEmpty && Identifier.isNormalized(p) {
            if p.utf8.last == UInt8(ascii: "*") {
                prefixes.append(String(decoding: p.utf8.dropLast(), as: UTF8.self))
            } else {
                exact.insert(p)
            }
        }
        self.exact = exact
        self.prefixes = prefixes
    }

    /// True iff `room` is NFC and equals an exact pattern or starts with a prefix, byte for byte.
    public func allows(_ room: String) -> Bool {
        guard Identifier.isNormalized(room) else { return false }
        if exact.contains(room) { return true }  // both sides NFC: String equality is byte equality
        return prefixes.contains { room.utf8.starts(with: $0.utf8) }
    }
}
