// libFuzzer target: what a WebSocket upgrade request feeds RelayCore before any frame —
// Sec-WebSocket-Extensions (permessage-deflate negotiation), Sec-WebSocket-Key and the request
// target's query string.
//
// Each input is used three ways, as a String (invalid UTF-8 replaced, as NIO's header strings):
//   1. Extension header values: the whole input as one value, and split on "\n" into several.
//      Invariants: the agreed window is 9…15; the response starts with the fixed prefix and,
//      negotiated again, gives the same agreement; without a `"` in the input, one value
//      `a, b` negotiates like the two values `a` and `b` (the HTTP list rule).
//   2. WebSocketKey.isValid agrees with a reference decoder written here (table lookup, padding
//      counted, decoded length == 16).
//   3. QueryString(uri:): `path` is exactly the bytes before the first `?`; the first non-empty
//      pair decodes (reference decoder here) to the value the subscript returns; at most
//      QueryString.maxParameters pairs are read.
// Everything must come back without a crash.

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    let text = String(decoding: bytes, as: UTF8.self)
    checkExtensions(text)
    checkKey(text)
    checkQuery(text)
    return 0
}

private let responsePrefix = "permessage-deflate; server_no_context_takeover; client_no_context_takeover"

private func checkAgreement(_ agreed: PerMessageDeflateNegotiation?, _ input: [String]) {
    guard let agreed else { return }
    guard (9...15).contains(agreed.serverMaxWindowBits), agreed.responseHeader.hasPrefix(responsePrefix) else {
        fatalError("odd agreement \(agreed) for \(input.debugDescription)")
    }
    guard PerMessageDeflateNegotiation.negotiate([agreed.responseHeader]) == agreed else {
        fatalError("response \(agreed.responseHeader.debugDescription) does not re-negotiate to itself (input \(input.debugDescription))")
    }
}

private func checkExtensions(_ text: String) {
    let whole = PerMessageDeflateNegotiation.negotiate([text])
    checkAgreement(whole, [text])
    let lines = text.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
    checkAgreement(PerMessageDeflateNegotiation.negotiate(lines), lines)
    if !text.utf8.contains(UInt8(ascii: "\"")) {
        let elements = text.utf8.split(separator: UInt8(ascii: ","), omittingEmptySubsequences: false).map { String(decoding: $0, as: UTF8.self) }
        let split = PerMessageDeflateNegotiation.negotiate(elements)
        guard split == whole else {
            fatalError("list rule: one value gives \(String(describing: whole)), split gives \(String(describing: split)) for \(text.debugDescription)")
        }
    }
}

private let base64Table = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8)

/// Standard base64 with `=` padding, decoded by table lookup; `nil` if not well-formed.
private func referenceDecodedCount(_ value: String) -> Int? {
    var chars = Array(value.utf8)
    while let f = chars.first, f == 0x20 || f == 0x09 { chars.removeFirst() }
    while let l = chars.last, l == 0x20 || l == 0x09 { chars.removeLast() }
    guard !chars.isEmpty, chars.count % 4 == 0 else { return nil }
    var padding = 0
    while padding < 2, chars.last == UInt8(ascii: "=") {
        chars.removeLast()
        padding += 1
    }
    guard chars.allSatisfy({ base64Table.contains($0) }) else { return nil }
    return (chars.count + padding) / 4 * 3 - padding
}

private func checkKey(_ text: String) {
    let valid = WebSocketKey.isValid(text)
    let reference = referenceDecodedCount(text) == 16
    guard valid == reference else { fatalError("WebSocketKey.isValid = \(valid), reference = \(reference) for \(text.debugDescription)") }
}

private func isHexDigit(_ b: UInt8) -> Bool {
    "0123456789abcdefABCDEF".utf8.contains(b)
}

private func referenceFormDecode(_ bytes: [UInt8]) -> String? {
    var out: [UInt8] = []
    var i = 0
    while i < bytes.count {
        if bytes[i] == UInt8(ascii: "%"), i + 2 < bytes.count, isHexDigit(bytes[i + 1]), isHexDigit(bytes[i + 2]),
            let h = UInt8(String(decoding: bytes[(i + 1)...(i + 2)], as: UTF8.self), radix: 16)
        {
            out.append(h)
            i += 3
        } else {
            out.append(bytes[i] == UInt8(ascii: "+") ? 0x20 : bytes[i])
            i += 1
        }
    }
    return String(validating: out, as: UTF8.self)
}

private func checkQuery(_ text: String) {
    let query = QueryString(uri: text)
    let utf8 = Array(text.utf8)
    let question = utf8.firstIndex(of: UInt8(ascii: "?"))
    guard Array(query.path.utf8) == Array(utf8[..<(question ?? utf8.count)]) else {
        fatalError("path \(query.path.debugDescription) is not the part before ? of \(text.debugDescription)")
    }
    _ = QueryString.decode(Substring(text))
    guard let question else { return }
    let pairs = utf8[(question + 1)...].split(separator: UInt8(ascii: "&")).map(Array.init)
    if let first = pairs.first {
        let equals = first.firstIndex(of: UInt8(ascii: "="))
        let name = referenceFormDecode(Array(first[..<(equals ?? first.count)]))
        let value = referenceFormDecode(equals.map { Array(first[($0 + 1)...]) } ?? [])
        if let name, let value, query[name] != value {
            fatalError("first pair \(name.debugDescription)=\(value.debugDescription) reads back as \(String(describing: query[name])) in \(text.debugDescription)")
        }
    }
    if pairs.count > QueryString.maxParameters {
        // A pair past the limit whose name appears nowhere earlier must be ignored.
        let late = pairs[QueryString.maxParameters]
        let equals = late.firstIndex(of: UInt8(ascii: "="))
        if let name = referenceFormDecode(Array(late[..<(equals ?? late.count)])),
            !pairs.prefix(QueryString.maxParameters).contains(where: { pair in
                let e = pair.firstIndex(of: UInt8(ascii: "="))
                return referenceFormDecode(Array(pair[..<(e ?? pair.count)])) == name
            }),
            query[name] != nil
        {
            fatalError("parameter \(name.debugDescription) past the limit was read in \(text.debugDescription)")
        }
    }
}
