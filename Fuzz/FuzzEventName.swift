// libFuzzer target: the event-name grammar.
//
// EventName.isValid is checked against a reference written here in a different style (split on
// ':' then on '-') for
//     ^[a-z0-9]+(-[a-z0-9]+)*:[a-z0-9]+(-[a-z0-9]+)*$
// The String overload also enforces EventName.maxLength (64 UTF-8 bytes); the byte-collection
// overload checks the grammar only (no length limit, see EventName.swift), so each overload is
// compared with the matching reference. EventPolicyTable must refuse exactly the names the
// grammar refuses.

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let raw = Array(UnsafeBufferPointer(start: data, count: size))

    // 1. The byte overload on the raw bytes, valid UTF-8 or not.
    let rawExpected = referenceGrammar(raw)
    guard EventName.isValid(raw) == rawExpected else {
        fatalError("EventName.isValid([UInt8]) = \(!rawExpected), reference = \(rawExpected) for \(raw)")
    }
    guard EventName.isValid(raw[...]) == rawExpected else {
        fatalError("EventName.isValid(ArraySlice) disagrees for \(raw)")
    }

    // 2. The String overload; invalid UTF-8 is repaired by String(decoding:), so compare on the
    //    string's own UTF-8.
    let name = String(decoding: raw, as: UTF8.self)
    let utf8 = Array(name.utf8)
    let expected = referenceName(utf8)
    guard EventName.isValid(name) == expected else {
        fatalError("EventName.isValid(String) = \(!expected), reference = \(expected) for \(name.debugDescription)")
    }

    // 3. The same name as a Substring in the middle of a larger string (shared storage, non-zero
    //    start index) through both overloads.
    // Cut on UTF-8 offsets, not Characters: a leading combining mark would otherwise merge
    // with the "x" into one Character and be dropped with it.
    let padded = "x" + name + "y"
    let sub = padded[padded.utf8.index(after: padded.startIndex)..<padded.utf8.index(before: padded.endIndex)]
    guard Array(sub.utf8) == utf8 else { fatalError("harness: substring is not the name") }
    guard EventName.isValid(String(sub)) == expected else {
        fatalError("EventName.isValid(String(Substring)) disagrees for \(name.debugDescription)")
    }
    guard EventName.isValid(sub.utf8) == referenceGrammar(utf8) else {
        fatalError("EventName.isValid(Substring.UTF8View) disagrees for \(name.debugDescription)")
    }

    // 4. The policy table refuses exactly the names outside the grammar.
    for enabled in [false, true] {
        do {
            _ = try EventPolicyTable.policy(forClientEvent: name, customEventsEnabled: enabled)
            guard expected else { fatalError("policy accepted invalid name \(name.debugDescription)") }
        } catch {
            guard (error.code == .invalidEventName) == !expected else {
                fatalError("policy threw \(error.code) for \(name.debugDescription), grammar says \(expected)")
            }
        }
    }
    return 0
}

/// `^[a-z0-9]+(-[a-z0-9]+)*:[a-z0-9]+(-[a-z0-9]+)*$` with no length limit: exactly two
/// colon-separated parts, each a non-empty list of non-empty `[a-z0-9]+` words joined by '-'.
private func referenceGrammar(_ bytes: [UInt8]) -> Bool {
    let parts = bytes.split(separator: UInt8(ascii: ":"), omittingEmptySubsequences: false)
    guard parts.count == 2 else { return false }
    for part in parts {
        let words = part.split(separator: UInt8(ascii: "-"), omittingEmptySubsequences: false)
        for word in words {
            guard !word.isEmpty else { return false }
            for b in word {
                let lower = b >= UInt8(ascii: "a") && b <= UInt8(ascii: "z")
                let digit = b >= UInt8(ascii: "0") && b <= UInt8(ascii: "9")
                guard lower || digit else { return false }
            }
        }
    }
    return true
}

/// The full rule for a name: the grammar and at most 64 UTF-8 bytes.
private func referenceName(_ bytes: [UInt8]) -> Bool {
    bytes.count <= 64 && referenceGrammar(bytes)
}
