// libFuzzer target: BinaryPacketAssembler, binary headers (`45`/`46`), placeholders, base64 and
// the fan-out encoding.
//
// Input: byte 0 chooses maxAttachments (0…15, low nibble) and the budget (high nibble n:
// 16 << n bytes, 16 B … 256 KiB, or unlimited for 0xF). The rest is split on 0x1E into messages, like a polling
// payload: a message starting with `4` is an Engine.IO message (its data goes to receiveText),
// one starting with `b` a polling binary packet (receiveBase64), anything else a WebSocket
// binary frame (receiveBinary, the whole message). Checks, after every message:
//   1. No trap, whatever the bytes; every error is a typed ProtocolError.
//   2. The assembler follows the documented state machine, tracked here independently: a
//      text while attachments are expected is `.incompleteBinaryPacket` with the right counts;
//      a binary message when idle is `.unexpectedBinaryMessage`; while skipping it is
//      `.skipped`; a text otherwise decodes exactly as `SocketPacket.decode` does.
//   3. Size bounds: the header as received plus the attachments never exceed the budget, and
//      `.binaryPacketTooLarge` comes exactly when the next attachment would cross it.
//   4. A completed packet has the attachments fed since its header, in order, as many as its
//      count (≤ maxAttachments), and valid placeholders.
//   5. Round trip: encoded() fed back over WebSocket and over polling gives an equal packet,
//      with a budget of exactly `byteCount`; one byte less is `.binaryPacketTooLarge`.
//   6. Base64: what decodes re-encodes to the same text (padding aside).
//   7. A completed event that passes InboundEvent(binary:) and EventValidator.custom keeps all
//      its placeholders through `stamp`, and the stamped packet round-trips too.

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    guard size >= 1 else { return 0 }
    let raw = Array(UnsafeBufferPointer(start: data, count: size))
    let maxAttachments = Int(raw[0] & 0x0F)
    let budgetNibble = Int(raw[0] >> 4)
    let maxPayload = budgetNibble == 0xF ? Int.max : 16 << budgetNibble
    var assembler = BinaryPacketAssembler(maxPayload: maxPayload, maxAttachments: maxAttachments)
    var model = Model.idle

    for message in raw.dropFirst().split(separator: 0x1E, omittingEmptySubsequences: false) {
        if message.first == UInt8(ascii: "4") {
            feedText(message.dropFirst(), &assembler, &model, maxPayload: maxPayload, maxAttachments: maxAttachments)
        } else if message.first == UInt8(ascii: "b") {
            let text = message.dropFirst()
            let decoded = Base64.decode(text)
            if let decoded {
                var again = Base64.encode(decoded)
                while again.last == UInt8(ascii: "=") { again.removeLast() }
                guard again.elementsEqual(text.prefix { $0 != UInt8(ascii: "=") }) else { fatalError("base64 is not canonical: \(show(text))") }
                guard Base64.decodedLength(of: text) == decoded.count else { fatalError("decodedLength disagrees for \(show(text))") }
            }
            feedBinary(&assembler, &model, size: Base64.decodedLength(of: text), bytes: decoded, maxPayload: maxPayload) {
                (a: inout BinaryPacketAssembler) throws(ProtocolError) in try a.receiveBase64(text)
            }
        } else {
            let bytes = Array(message)
            feedBinary(&assembler, &model, size: bytes.count, bytes: bytes, maxPayload: maxPayload) {
                (a: inout BinaryPacketAssembler) throws(ProtocolError) in try a.receiveBinary(bytes)
            }
        }
        model.check(assembler)
    }
    return 0
}

/// The assembler's state as this harness sees it.
private enum Model {
    case idle
    case collecting(header: SocketPacket, headerBytes: Int, attachments: [[UInt8]], used: Int)
    case skipping(Int)

    func check(_ a: BinaryPacketAssembler) {
        switch self {
        case .idle:
            guard !a.isAwaitingAttachments, a.remainingSkips == 0, a.remainingBudget == nil else { fatalError("assembler not idle: \(a)") }
        case .collecting(let header, _, let attachments, let used):
            guard a.isAwaitingAttachments, a.remainingAttachments == header.attachmentCount - attachments.count,
                a.remainingBudget == a.maxPayload - used, a.remainingSkips == 0, used <= a.maxPayload
            else { fatalError("assembler state differs from the model \(self): \(a)") }
        case .skipping(let n):
            guard !a.isAwaitingAttachments, a.remainingSkips == n else { fatalError("expected \(n) skips: \(a)") }
        }
    }
}

private func feedText(_ data: ArraySlice<UInt8>, _ a: inout BinaryPacketAssembler, _ model: inout Model, maxPayload: Int, maxAttachments: Int) {
    if case .collecting(let header, _, let attachments, _) = model {
        do {
            let out = try a.receiveText(data)
            fatalError("text while collecting gave \(out)")
        } catch .incompleteBinaryPacket(let ackID, let expected, let received) {
            guard ackID == header.ackID, expected == header.attachmentCount, received == attachments.count else {
                fatalError("wrong incompleteBinaryPacket(\(String(describing: ackID)), \(expected), \(received)) for \(header)")
            }
        } catch {
            fatalError("text while collecting threw \(error)")
        }
        model = .idle
        model.check(a)
        // Documented: the text was not consumed; feed it again.
    }
    let reference = Result { () throws(ProtocolError) in try SocketPacket.decode(data, maxAttachments: maxAttachments) }
    let result = Result { () throws(ProtocolError) in try a.receiveText(data) }
    let announced: Int? =
        data.first == UInt8(ascii: "5") || data.first == UInt8(ascii: "6") ? SocketPacket.attachmentPrefix(data)?.count : nil
    switch (reference, result) {
    case (.success(let packet), .success(.packet(let p))):
        guard !packet.isBinary, p == packet else { fatalError("receiveText gave \(p), decode gave \(packet)") }
        model = .idle
    case (.success(let packet), .success(.binaryPacket(let p))):
        guard packet.isBinary, packet.attachmentCount == 0, p == BinaryPacket(header: packet, attachments: []), data.count <= maxPayload else {
            fatalError("unexpected complete packet \(p) for \(show(data))")
        }
        model = .idle
        checkComplete(p, headerBytes: data.count, fed: [], maxPayload: maxPayload, maxAttachments: maxAttachments)
    case (.success(let packet), .success(.awaitingAttachments(let remaining))):
        guard packet.isBinary, remaining == packet.attachmentCount, remaining > 0, remaining <= maxAttachments, data.count <= maxPayload else {
            fatalError("awaiting \(remaining) for \(packet)")
        }
        model = .collecting(header: packet, headerBytes: data.count, attachments: [], used: data.count)
    case (.success(let packet), .failure(.binaryPacketTooLarge(let ackID, let limit))):
        guard packet.isBinary, data.count > maxPayload, limit == maxPayload, ackID == packet.ackID else {
            fatalError("header refused as too large: \(packet), \(data.count) bytes, limit \(maxPayload)")
        }
        model = packet.attachmentCount > 0 ? .skipping(packet.attachmentCount) : .idle
    case (.failure(let expected), .failure(let error)):
        guard expected == error else { fatalError("receiveText threw \(error), decode threw \(expected)") }
        model = (announced ?? 0) > 0 ? .skipping(announced!) : .idle
    default:
        fatalError("receiveText gave \(result), decode gave \(reference) for \(show(data))")
    }
}

private func feedBinary(
    _ a: inout BinaryPacketAssembler, _ model: inout Model, size: Int?, bytes: [UInt8]?, maxPayload: Int,
    _ receive: (inout BinaryPacketAssembler) throws(ProtocolError) -> BinaryPacketAssembler.Output
) {
    let result = Result { () throws(ProtocolError) in try receive(&a) }
    switch model {
    case .idle:
        guard case .failure(.unexpectedBinaryMessage) = result else { fatalError("binary message when idle gave \(result)") }
    case .skipping(let n):
        guard case .success(.skipped(let remaining)) = result, remaining == n - 1 else { fatalError("skipping \(n) gave \(result)") }
        model = remaining > 0 ? .skipping(remaining) : .idle
    case .collecting(let header, let headerBytes, var attachments, let used):
        let left = header.attachmentCount - attachments.count - 1
        let after: Model = left > 0 ? .skipping(left) : .idle
        guard let size else {
            guard case .failure(.invalidBase64) = result else { fatalError("impossible base64 length gave \(result)") }
            model = after
            return
        }
        if size > maxPayload - used {
            guard case .failure(.binaryPacketTooLarge(header.ackID, maxPayload)) = result else {
                fatalError("an attachment of \(size) bytes with \(maxPayload - used) left gave \(result)")
            }
            model = after
            return
        }
        guard let bytes else {
            guard case .failure(.invalidBase64) = result else { fatalError("invalid base64 gave \(result)") }
            model = after
            return
        }
        attachments.append(bytes)
        if left == 0 {
            guard case .success(.binaryPacket(let p)) = result else { fatalError("last attachment gave \(result)") }
            model = .idle
            checkComplete(p, headerBytes: headerBytes, fed: attachments, maxPayload: maxPayload, maxAttachments: a.maxAttachments)
            guard p.header == header else { fatalError("header changed: \(header) → \(p.header)") }
        } else {
            guard case .success(.awaitingAttachments(left)) = result else { fatalError("attachment gave \(result), \(left) left") }
            model = .collecting(header: header, headerBytes: headerBytes, attachments: attachments, used: used + size)
        }
    }
}

private func checkComplete(_ p: BinaryPacket, headerBytes: Int, fed: [[UInt8]], maxPayload: Int, maxAttachments: Int) {
    guard p.header.isBinary, p.attachments == fed, p.attachments.count == p.header.attachmentCount, p.attachments.count <= maxAttachments
    else { fatalError("inconsistent packet \(p), fed \(fed)") }
    guard fed.reduce(headerBytes, { $0 + $1.count }) <= maxPayload else { fatalError("packet over the budget: \(p)") }
    guard let json = p.header.data, (try? BinaryPlaceholder.validate(json, attachmentCount: p.attachments.count)) != nil else {
        fatalError("invalid placeholders passed: \(p)")
    }
    checkRoundTrip(p)

    guard p.header.type == .binaryEvent, let event = try? InboundEvent(binary: p) else { return }
    guard event.attachments == p.attachments, event.ackID == p.header.ackID else { fatalError("InboundEvent lost data: \(event)") }
    guard let valid = try? EventValidator.custom(event.payload, attachmentCount: event.attachments.count) else { return }
    let stamped = EventValidator.stamp(valid, from: "user-1", ts: 42)
    guard (try? BinaryPlaceholder.validate(stamped, attachmentCount: event.attachments.count)) != nil,
        stamped["from"] == .string("user-1"), stamped["ts"] == .int(42)
    else { fatalError("stamping broke the placeholders: \(valid) → \(stamped)") }
    checkRoundTrip(.event(name: event.name, payload: stamped, attachments: event.attachments, namespace: p.header.namespace))
}

/// Encodes once, then reassembles over both transports with a budget of exactly `byteCount`.
private func checkRoundTrip(_ p: BinaryPacket) {
    let encoded = p.encoded()
    let budget = p.byteCount
    guard encoded.header.first == UInt8(ascii: "4"), encoded.attachments == p.attachments,
        encoded.webSocketByteCount == budget + 1
    else { fatalError("encoding is inconsistent: \(p) → \(show(encoded.header))") }

    var ws = BinaryPacketAssembler(maxPayload: budget, maxAttachments: p.attachments.count)
    var polling = BinaryPacketAssembler(maxPayload: budget, maxAttachments: p.attachments.count)
    do {
        var out = try ws.receiveText(encoded.header[1...])
        for attachment in encoded.attachments { out = try ws.receiveBinary(attachment) }
        guard out == .binaryPacket(p) else { fatalError("WebSocket round trip: \(p) → \(out)") }

        let parts = encoded.pollingPayload().split(separator: 0x1E, omittingEmptySubsequences: false)
        guard parts.count == p.attachments.count + 1, parts.dropFirst().allSatisfy({ $0.first == UInt8(ascii: "b") }),
            parts.map(Array.init) == encoded.pollingPackets()
        else { fatalError("polling payload is malformed for \(p)") }
        out = try polling.receiveText(parts[0].dropFirst())
        for part in parts.dropFirst() { out = try polling.receiveBase64(part.dropFirst()) }
        guard out == .binaryPacket(p) else { fatalError("polling round trip: \(p) → \(out)") }
    } catch {
        fatalError("round trip of \(p) threw \(error): header \(show(encoded.header))")
    }

    guard budget > 0 else { return }
    var tight = BinaryPacketAssembler(maxPayload: budget - 1, maxAttachments: p.attachments.count)
    do {
        _ = try tight.receiveText(encoded.header[1...])
        for attachment in encoded.attachments { _ = try tight.receiveBinary(attachment) }
        fatalError("a packet of \(budget) bytes passed a budget of \(budget - 1): \(p)")
    } catch .binaryPacketTooLarge(p.header.ackID, budget - 1) {
        return
    } catch {
        fatalError("tight budget threw \(error) for \(p)")
    }
}

private func show<C: Collection>(_ bytes: C) -> String where C.Element == UInt8 {
    let shown = bytes.prefix(512)
    let text = String(decoding: shown, as: UTF8.self).debugDescription
    return bytes.count > shown.count ? "\(text)… (\(bytes.count) bytes)" : text
}
