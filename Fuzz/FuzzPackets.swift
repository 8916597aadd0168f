// libFuzzer target: one inbound WebSocket text frame through the whole RelayCore path a client
// event takes: Engine.IO decode → Socket.IO decode → InboundEvent → event policy → validators.
//
// Invariants:
//   1. Socket.IO codec round trip: a decoded SocketPacket, re-encoded with encodedMessage()
//      (which includes the Engine.IO `4`), decodes as an Engine.IO message to an equal packet.
//   2. SocketPacket.eventMessage(name:payload:) and ackMessage(id:payload:) decode back to the
//      same name/payload and to SocketPacket(type: .ack, ackID: id, data: [payload]).
//   3. The policy table accepts only grammar-valid names and never a server-only event.
//   4. Every validator either throws a RelayError or returns a payload that passes the same
//      validator again unchanged (validated output is a fixpoint), and stamping puts `from`
//      and `ts` last, once each.
// Everything else must be refused with a typed error, never a crash.

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let frame = Array(UnsafeBufferPointer(start: data, count: size))
    guard let engine = try? EnginePacket.decode(frame[...]) else { return 0 }
    guard case .message(let body) = engine else { return 0 }

    let packet: SocketPacket
    do {
        packet = try SocketPacket.decode(body)
    } catch {
        return 0
    }
    checkRoundTrip(packet, frame: frame)

    guard let event = try? InboundEvent(packet: packet) else { return 0 }
    guard event.ackID == packet.ackID else { fatalError("InboundEvent lost the ack id") }
    checkEventMessages(event)
    checkPolicy(event.name)
    checkValidators(event.payload)
    return 0
}

private func checkRoundTrip(_ packet: SocketPacket, frame: [UInt8]) {
    let encoded = packet.encodedMessage()
    guard case .message(let body)? = try? EnginePacket.decode(encoded[...]) else {
        fatalError("encodedMessage() is not an Engine.IO message: \(show(encoded))")
    }
    let again: SocketPacket
    do {
        again = try SocketPacket.decode(body)
    } catch {
        fatalError("re-encoded packet does not decode (\(error)): frame \(show(frame)) re-encoded \(show(encoded))")
    }
    guard again == packet else {
        fatalError("round trip changed the packet: frame \(show(frame)) decoded \(packet) re-encoded \(show(encoded)) decoded \(again)")
    }
}

private func checkEventMessages(_ event: InboundEvent) {
    let message = SocketPacket.eventMessage(name: event.name, payload: event.payload)
    guard case .message(let body)? = try? EnginePacket.decode(message[...]),
        let packet = try? SocketPacket.decode(body), let decoded = try? InboundEvent(packet: packet)
    else {
        fatalError("eventMessage output does not decode: \(show(message))")
    }
    guard decoded == InboundEvent(name: event.name, payload: event.payload, ackID: nil) else {
        fatalError("eventMessage round trip changed the event: \(event) → \(decoded)")
    }

    let id = event.ackID ?? 0
    let ack = SocketPacket.ackMessage(id: id, payload: event.payload)
    guard case .message(let ackBody)? = try? EnginePacket.decode(ack[...]), let ackPacket = try? SocketPacket.decode(ackBody) else {
        fatalError("ackMessage output does not decode: \(show(ack))")
    }
    guard ackPacket == SocketPacket(type: .ack, ackID: id, data: .array([event.payload])) else {
        fatalError("ackMessage round trip changed the ack: \(show(ack)) → \(ackPacket)")
    }
}

private func checkPolicy(_ name: String) {
    for enabled in [false, true] {
        do {
            let policy = try EventPolicyTable.policy(forClientEvent: name, customEventsEnabled: enabled)
            guard EventName.isValid(name) else { fatalError("policy for a name outside the grammar: \(name.debugDescription)") }
            guard policy.handling != .serverOnly else { fatalError("clients may emit server-only \(name)") }
            guard policy.name == name else { fatalError("policy for \(name) is named \(policy.name)") }
            if EventPolicyTable.known[name] == nil {
                guard enabled, policy == EventPolicyTable.custom(name) else { fatalError("unexpected custom policy for \(name)") }
            }
        } catch {
            switch error.code {
            case .invalidEventName:
                guard !EventName.isValid(name) else { fatalError("valid name refused as invalid: \(name.debugDescription)") }
            case .eventNotAllowed:
                guard EventPolicyTable.known[name]?.handling == .serverOnly else { fatalError("event_not_allowed for \(name)") }
            case .customEventsDisabled:
                guard !enabled, EventPolicyTable.known[name] == nil else { fatalError("custom_events_disabled for \(name)") }
            default:
                fatalError("unexpected policy error \(error) for \(name.debugDescription)")
            }
        }
    }
}

private func checkValidators(_ payload: JSONValue) {
    if let out = try? EventValidator.reaction(payload) {
        guard (try? EventValidator.reaction(out)) == out else { fatalError("reaction output does not re-validate: \(out)") }
        guard let id = out["messageId"]?.stringValue, isNFCReference(id), id.unicodeScalars.allSatisfy({ !isControl($0) }) else {
            fatalError("reaction accepted a messageId that is not an NFC identifier: \(out)")
        }
        checkStamp(out)
    }
    if let (out, duration) = try? EventValidator.shareLive(payload) {
        guard (1...EventValidator.maxLiveShareSeconds).contains(duration) else { fatalError("shareLive duration \(duration)") }
        guard let (again, d2) = try? EventValidator.shareLive(out), again == out, d2 == duration else {
            fatalError("shareLive output does not re-validate: \(out)")
        }
        checkStamp(out)
    }
    if let out = try? EventValidator.locationUpdate(payload) {
        guard (try? EventValidator.locationUpdate(out)) == out else { fatalError("locationUpdate output does not re-validate: \(out)") }
        guard let lat = out["lat"]?.doubleValue, (-90...90).contains(lat), let lng = out["lng"]?.doubleValue, (-180...180).contains(lng) else {
            fatalError("locationUpdate out of range: \(out)")
        }
        checkStamp(out)
    }
    if let out = try? EventValidator.roomOnly(payload) {
        guard (try? EventValidator.roomOnly(out)) == out else { fatalError("roomOnly output does not re-validate: \(out)") }
        guard let room = out["room"]?.stringValue, isNFCReference(room), room.unicodeScalars.allSatisfy({ !isControl($0) }) else {
            fatalError("roomOnly accepted a room that is not an NFC identifier: \(out)")
        }
        checkStamp(out)
    }
    if let out = try? EventValidator.custom(payload) {
        guard out == payload, (try? EventValidator.custom(out)) == out else { fatalError("custom changed the payload: \(out)") }
        checkStamp(out)
    }
    for kind in ReceiptKind.allCases {
        if let receipt = try? NewReceipt(payload: payload, userID: "u1", kind: kind, ts: 1_700_000_000_000) {
            guard EventValidator.isValidRoomName(receipt.room), !receipt.messageID.isEmpty,
                receipt.messageID.utf8.count <= EventValidator.maxMessageIDLength,
                !receipt.authorID.isEmpty, receipt.authorID.utf8.count <= EventValidator.maxAuthorIDLength,
                isNFCReference(receipt.room), isNFCReference(receipt.messageID), isNFCReference(receipt.authorID),
                receipt.kind == kind, receipt.userID == "u1"
            else { fatalError("NewReceipt accepted an invalid receipt: \(receipt)") }
            let json = Receipt(id: 1, receipt).json
            guard let parsed = try? JSONParser.parse(JSONWriter.bytes(json)), parsed == json else {
                fatalError("receipt JSON does not round-trip: \(json)")
            }
        }
    }
}

/// `stamp` must leave exactly one `from` and one `ts`, last, with the server's values.
private func checkStamp(_ payload: JSONValue) {
    let stamped = EventValidator.stamp(payload, from: "user-1", ts: 42)
    guard case .object(let pairs) = stamped, pairs.count >= 2 else { fatalError("stamp did not give an object: \(stamped)") }
    guard pairs[pairs.count - 2].0 == "from", pairs[pairs.count - 2].1 == .string("user-1"),
        pairs[pairs.count - 1].0 == "ts", pairs[pairs.count - 1].1 == .int(42),
        pairs.filter({ $0.0 == "from" || $0.0 == "ts" }).count == 2
    else { fatalError("stamp is forgeable: \(stamped)") }
}

private func show(_ bytes: [UInt8]) -> String {
    let shown = bytes.prefix(512)
    let text = String(decoding: shown, as: UTF8.self).debugDescription
    return bytes.count > shown.count ? "\(text)… (\(bytes.count) bytes)" : text
}

/// NFC by a different route than `Identifier.isNormalized`: the stdlib's allocated NFC bytes.
private func isNFCReference(_ s: String) -> Bool { Array(s.utf8) == s._nfcCodeUnits }

/// C0, DEL and C1 control characters.
private func isControl(_ u: Unicode.Scalar) -> Bool { u.value < 0x20 || (0x7F...0x9F).contains(u.value) }
