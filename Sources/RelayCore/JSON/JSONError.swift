/// Why a JSON text was refused. Each case carries the byte offset where parsing stopped.
public enum JSONError: Error, Equatable, Sendable {
    /// The input ended inside a value.
    case unexpectedEnd
    /// A byte that cannot start or continue a value here.
    case unexpectedByte(UInt8, offset: Int)
    /// A number that does not match the RFC 8259 grammar, or is out of `Double`'s range.
    case invalidNumber(offset: Int)
    /// A backslash escape that JSON does not define.
    case invalidEscape(offset: Int)
    /// Invalid UTF-8, or a `\u` escape that is a lone surrogate.
    case invalidUnicode(offset: Int)
    /// A raw control character (U+0000…U+001F) inside a string.
    case controlCharacterInString(offset: Int)
    /// Arrays and objects nested deeper than the limit.
    case tooDeep(limit: Int)
    /// Something other than whitespace after the value.
    case trailingBytes(offset: Int)
    /// An object key that the same object already has; `offset` is the key's opening quote.
    case duplicateKey(offset: Int)
}
