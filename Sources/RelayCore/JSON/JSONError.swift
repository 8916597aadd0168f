/// Why a JSON text was refused. Each case carries the byte offset where parsing stopped.
public enum JSONError: Error, Equatable, Sendable {
    case unexpectedEnd
    case unexpectedByte(UInt8, offset: Int)
    case invalidNumber(offset: Int)
    case invalidEscape(offset: Int)
    case invalidUnicode(offset: Int)
    case controlCharacterInString(offset: Int)
    case tooDeep(limit: Int)
    case trailingBytes(offset: Int)
}
