/// The rules every identifier Relay reads from the network follows: user ids, room names, room
/// patterns in tokens, message ids, author ids.
///
/// Swift compares and hashes `String`s by canonical equivalence, so `"cafe\u{301}"` (decomposed)
/// and `"caf\u{E9}"` (precomposed) are equal as dictionary keys while their bytes differ — and
/// the bytes are what a database, a Redis channel or another client sees. Relay therefore
/// requires identifiers in Unicode Normalization Form C and refuses any other input at the
/// boundary. Two NFC strings are canonically equivalent exactly when their bytes are equal, so
/// once every identifier is NFC, `String` equality, hashing and byte equality all agree.
public enum Identifier {
    /// True iff `s` is in Normalization Form C.
    ///
    /// ASCII strings are NFC and are checked without allocating. Otherwise the string's UTF-8
    /// is compared, byte by byte, with the standard library's own NFC of it
    /// (`String._withNFCCodeUnits`, the normalizer the stdlib uses for `==`; the unit tests
    /// check it against Foundation's `precomposedStringWithCanonicalMapping`).
    public static func isNormalized(_ s: String) -> Bool {
        if s.utf8.allSatisfy({ $0 < 0x80 }) { return true }
        var utf8 = s.utf8.makeIterator()
        do {
            try s._withNFCCodeUnits { normalized in
                guard utf8.next() == normalized else { throw Mismatch() }
            }
        } catch {
            return false
        }
        return utf8.next() == nil  // the normal form must not be shorter
    }

    /// True iff `s` is non-empty, at most `maxBytes` UTF-8 bytes, in NFC, and free of control
    /// characters: C0 (U+0000…U+001F), DEL (U+007F) and C1 (U+0080…U+009F).
    public static func isValid(_ s: String, maxBytes: Int) -> Bool {
        let utf8 = s.utf8
        guard !utf8.isEmpty, utf8.count <= maxBytes else { return false }
        var previous: UInt8 = 0
        for byte in utf8 {
            if byte < 0x20 || byte == 0x7F { return false }
            // C1 controls are U+0080…U+009F: the two-byte sequences C2 80…C2 9F.
            if previous == 0xC2, (0x80...0x9F).contains(byte) { return false }
            previous = byte
        }
        return isNormalized(s)
    }

    private struct Mismatch: Error {}
}
