// libFuzzer target: what recovery reads from the network and from Redis.
//
// 1. The first bytes as text: `WireOffset`, `StreamOffset` and, parsed as JSON, the CONNECT auth
//    (`ConnectRequest`) and a kept session (`KeptSession`). Invariants: a parsed offset prints
//    back to an equal one; a record that parses survives its own JSON unchanged.
// 2. The bytes as a program for a `RecoveryLog` and a `HistoryStore` against simple models:
//    every read is in offset order and starts after the offset asked for; a cut never lies
//    outside what the log recorded; nothing traps.

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    let text = String(decoding: bytes, as: UTF8.self)

    if let wire = WireOffset(text), WireOffset(wire.description) != wire {
        fatalError("WireOffset does not round-trip: \(text.debugDescription)")
    }
    if let offset = StreamOffset(id: text), StreamOffset(id: offset.description) != offset {
        fatalError("StreamOffset does not round-trip: \(text.debugDescription)")
    }
    if let json = try? JSONParser.parse(bytes) {
        _ = try? ConnectRequest(data: json, fallbackToken: nil, maxRooms: 8)
        if let record = KeptSession(json: json) {
            guard let again = try? JSONParser.parse(JSONWriter.string(record.json)), KeptSession(json: again) == record else {
                fatalError("KeptSession does not survive its JSON: \(text.debugDescription)")
            }
            _ = record.log.cuts(lastReceived: nil)
        }
    }

    runPrograms(bytes)
    return 0
}

private func runPrograms(_ bytes: [UInt8]) {
    let streams: [StreamKey] = [.room("a"), .room("b"), .user("u")]
    var log = RecoveryLog(maxRuns: 4)
    var store = HistoryStore<Int>(limits: HistoryLimits(maxEvents: 5, maxAgeMs: 50, maxBytes: 200, maxStreamBytes: 2 << 20))
    var recorded: [StreamKey: [StreamOffset]] = [:]
    var wall: Int64 = 0
    var i = 0
    while i + 1 < bytes.count {
        let op = bytes[i], arg = bytes[i + 1]
        i += 2
        let stream = streams[Int(arg) % streams.count]
        switch op % 6 {
        case 0:
            log.follow(stream, from: store.head(of: stream))
            recorded[stream] = []
        case 1:
            log.unfollow(stream)
            recorded[stream] = nil
        case 2:
            wall += Int64(arg % 8)
            let offset = store.append(Int(arg), bytes: Int(arg % 64) + 1, to: stream, wallMs: wall)
            log.record(stream, offset)
            recorded[stream]?.append(offset)
        case 3:
            let all = recorded[stream] ?? []
            let last = all.isEmpty ? nil : WireOffset(all[Int(arg) % all.count], stream: stream)
            if let cuts = log.cuts(lastReceived: last) {
                guard Set(cuts.keys) == log.streams else { fatalError("cuts cover other streams than the log follows") }
                if let last, cuts[stream] != last.offset { fatalError("the cut of the named stream is not the offset given") }
            }
        case 4:
            let after = (recorded[stream] ?? []).last ?? .zero
            if case .success(let page) = store.read(stream, after: after, limit: Int(arg % 7), maxBytes: Int(arg)) {
                let offsets = page.entries.map(\.offset)
                guard offsets == offsets.sorted(), offsets.allSatisfy({ $0 > after }) else { fatalError("a page out of order or not after its offset") }
            }
        default:
            wall += Int64(arg)
            store.trim(wallMs: wall)
            guard store.totalBytes <= 200 || store.totalEvents <= 1 else { fatalError("over the byte budget: \(store.totalBytes)") }
        }
    }
}
