// libFuzzer target: the strict JSON parser and the writer.
//
// Built by scripts/fuzz.sh together with every file of Sources/RelayCore (one module, so no
// `import RelayCore`). Invariants checked on every input the parser accepts:
//   1. JSONWriter.bytes(v) parses again, to a value equal (==) to v, in both directions.
//   2. Writing is a fixpoint: writing the re-parsed value gives exactly the same bytes.
//   3. parsePrefix agrees with parse: same value, and it consumed the whole input.
//   4. No accepted object, at any depth, has two keys that compare equal as Swift Strings
//      (the parser refuses duplicate keys with JSONError.duplicateKey).
//   5. A duplicateKey error points at a '"' inside the input.
// Inputs the parser refuses must be refused with a JSONError (typed throws), never a crash.

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let input = UnsafeBufferPointer(start: data, count: size)
    let bytes = Array(input)

    let first: JSONValue
    do {
        first = try JSONParser.parse(bytes)
    } catch {
        if case .duplicateKey(let offset) = error {
            guard offset >= 0, offset < size, input[offset] == UInt8(ascii: "\"") else {
                fatalError("duplicateKey offset \(offset) is not a quote: \(describe(bytes))")
            }
        }
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

    guard hasUniqueKeys(first) else { fatalError("parse accepted a duplicate key: \(describe(bytes))") }

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

/// True when no object in `value` repeats a key (checked by brute force, unlike the parser).
private func hasUniqueKeys(_ value: JSONValue) -> Bool {
    switch value {
    case .array(let items):
        return items.allSatisfy(hasUniqueKeys)
    case .object(let pairs):
        for i in pairs.indices {
            for j in pairs.indices where j > i && pairs[i].0 == pairs[j].0 { return false }
        }
        return pairs.allSatisfy { hasUniqueKeys($0.1) }
    default:
        return true
    }
}

private func describe(_ bytes: [UInt8]) -> String {
    let shown = bytes.prefix(512)
    let text = String(decoding: shown, as: UTF8.self).debugDescription
    return bytes.count > shown.count ? "\(text)… (\(bytes.count) bytes)" : text
}
