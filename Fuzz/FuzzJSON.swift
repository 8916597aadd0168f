// libFuzzer target: the strict JSON parser and the writer.
//
// Built by scripts/fuzz.sh together with every file of Sources/RelayCore (one module, so no
// `import RelayCore`). Invariants checked on every input the parser accepts:
//   1. JSONWriter.bytes(v) parses again, to a value equal (==) to v, in both directions.
//   2. Writing is a fixpoint: writing the re-parsed value gives exactly the same bytes.
//   3. parsePrefix agrees with parse: same value, and it consumed the whole input.
// Inputs the parser refuses must be refused with a JSONError (typed throws), never a crash.

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let input = UnsafeBufferPointer(start: data, count: size)
    let bytes = Array(input)

    let first: JSONValue
    do {
        first = try JSONParser.parse(bytes)
    } catch {
        // Refused input: parsePrefix must not accept it as a complete value either.
        if let (_, consumed) = try? JSONParser.parsePrefix(input), consumed == size {
            fatalError("parse refused (\(error)) what parsePrefix accepted whole: \(describe(bytes))")
        }
        return 0
    }

    guard let (prefixValue, consumed) = try? JSONParser.parsePrefix(input) else {
        fatalError("parsePrefix refused what parse accepted: \(describe(bytes))")
    }
    guard consumed == size, prefixValue == first else {
        fatalError("parsePrefix disagrees with parse (consumed \(consumed) of \(size)): \(describe(bytes))")
    }

    let written = JSONWriter.bytes(first)
    let second: JSONValue
    do {
        second = try JSONParser.parse(written)
    } catch {
        fatalError("writer output does not parse (\(error)): input \(describe(bytes)) written \(describe(written))")
    }
    guard first == second, second == first else {
        fatalError("round trip changed the value: input \(describe(bytes)) written \(describe(written)) first \(first) second \(second)")
    }
    let rewritten = JSONWriter.bytes(second)
    guard rewritten == written else {
        fatalError("writer is not a fixpoint: \(describe(written)) then \(describe(rewritten))")
    }
    return 0
}

private func describe(_ bytes: [UInt8]) -> String {
    let shown = bytes.prefix(512)
    let text = String(decoding: shown, as: UTF8.self).debugDescription
    return bytes.count > shown.count ? "\(text)… (\(bytes.count) bytes)" : text
}
