// libFuzzer target: binary packets as EngineSession assembles them — `45`/`46` headers, text
// events and attachments interleaved on one session, on either transport, before and after
// CONNECT.
//
// Input: byte 0 chooses the session:
//   bit 0     the transport: WebSocket (1) or long-polling (0)
//   bit 1     the harness sends `40` and completes the login before the first message
//   bit 2     logins fail (CONNECT_ERROR; the session stays open, the third closes 4003)
//   bits 4-7  `maxAttachments` (0…15)
// Byte 1: `maxEventBytes` is 32 << (bits 0-2) (32 B … 4 KiB); bits 3-4 choose `maxPayload`:
// 1 000 000, 64, 256 or 1024 (the assembler holds min(maxPayload, maxEventBytes)).
// The rest is split on 0x1E into messages:
//   - one starting with a digit `0`…`6` is an Engine.IO text packet: `receive(_:from:)` on the
//     session's transport (`45<n>-[…]`, `46<n>-<id>[…]`, `42[…]`, `40`, `2`, …);
//   - one starting with `b`: over polling, the polling packet itself (`b<base64>`, the base64
//     possibly invalid); over WebSocket, `receiveBinary` with the bytes after the `b`;
//   - anything else is an attachment of exactly these bytes: over WebSocket `receiveBinary`,
//     over polling the packet `b` + its base64 through `receive(_:from: .polling, …)`.
// Every `.authenticate` is answered at once. The packet, byte, event and error budgets are set
// high (and the clock is fixed), so that only the binary rules close the session.
//
// Checks, for every message:
// 1. No trap, whatever the bytes.
// 2. Before CONNECT (no user, not closed): a binary header (`45…`/`46…`) is refused at its
//    header — exactly a `.send` of a `44{…}` CONNECT_ERROR, followed by `.close(code: 4003, …)`
//    exactly when it is the `maxConnectRefusals`th refusal since the session opened or its
//    socket left with `41` — and every attachment (polling or WebSocket) is skipped (those its
//    refused header announced) or refused the same way: no attachment is ever assembled for a
//    client that has not logged in. No `.handle` before CONNECT.
// 3. After CONNECT: a `.handle` that a binary packet produced (it came on an attachment, or on
//    a `45<0>-` header) is a packet whose recipient cost — its canonical header text (with the
//    `4`) plus, per attachment, 2 + the length of its base64 — is at most `maxEventBytes`; its
//    attachments are exactly the ones fed since its header, in order, as many as the header
//    announced, and at most `maxAttachments`. A `42` event never carries attachments.
// 4. `.close` at most once, last in its list; no action at all after it. Every `.send` is an
//    Engine.IO packet (`0`…`6`); a CONNECT_ERROR to the main namespace (`44{…}`) is last, or
//    followed only by 4003; no more than `maxConnectRefusals` of them in a session.

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let input = Array(UnsafeBufferPointer(start: data, count: size))
    guard input.count >= 2 else { return 0 }
    var harness = AttachmentHarness(input: input)
    harness.run()
    return 0
}

private struct AttachmentHarness {
    let input: [UInt8]
    let transport: EngineSession.Transport
    let connectFirst: Bool
    let refuseLogin: Bool
    let maxAttachments: Int
    let maxEventBytes: Int
    let user = AuthenticatedUser(userID: "u", rooms: RoomAuthorization(patterns: ["conversation:*"]), expiresAt: .max)
    let now: Int64 = 0

    var session: EngineSession
    var closes = 0
    /// CONNECT_ERRORs to the main namespace so far.
    var refusals = 0
    /// The last Engine.IO message fed after CONNECT (a binary packet's header, if it is one),
    /// and the attachments fed since (nil: one whose base64 is invalid).
    var header: ArraySlice<UInt8>?
    var fed: [[UInt8]?] = []
    var handles = 0

    init(input: [UInt8]) {
        self.input = input
        let flags = input[0]
        transport = flags & 0x01 != 0 ? .websocket : .polling
        connectFirst = flags & 0x02 != 0
        refuseLogin = flags & 0x04 != 0
        maxAttachments = Int(flags >> 4)
        maxEventBytes = 32 << Int(input[1] & 0x07)
        var c = SessionConfiguration.fuzzing
        c.maxEventBytes = maxEventBytes
        c.maxPayload = [1_000_000, 64, 256, 1024][Int(input[1] >> 3) & 3]
        c.maxAttachments = maxAttachments
        c.budgets.events = .init(perSecond: 0, burst: 1e9)
        c.budgets.errorReplies = .init(perSecond: 0, burst: 1e9)
        c.budgets.inbound.packets = .init(perSecond: 0, burst: 1e9)
        c.budgets.inbound.eventBytes = .init(perSecond: 0, burst: 1e12)
        session = EngineSession(configuration: c, transport: transport, engineSID: "E", socketSID: "S", now: 0)
    }

    mutating func run() {
        _ = session.start(now: now)
        if connectFirst { text([UInt8(ascii: "4"), UInt8(ascii: "0")][...]) }
        for message in input.dropFirst(2).split(separator: 0x1E, omittingEmptySubsequences: false) {
            if let first = message.first, (UInt8(ascii: "0")...UInt8(ascii: "6")).contains(first) {
                text(message)
            } else if message.first == UInt8(ascii: "b") {
                if transport == .polling {
                    attachment(Base64.decode(message.dropFirst()), message: message) { s in
                        s.receive(message, from: .polling, now: 0, wallMs: 0)
                    }
                } else {
                    let bytes = Array(message.dropFirst())
                    attachment(bytes, message: message) { s in s.receiveBinary(bytes, from: .websocket, now: 0, wallMs: 0) }
                }
            } else {
                let bytes = Array(message)
                attachment(bytes, message: message) { s in
                    s.transport == .websocket
                        ? s.receiveBinary(bytes, from: .websocket, now: 0, wallMs: 0)
                        : s.receive(EncodedBinaryPacket.pollingPacket(forAttachment: bytes)[...], from: .polling, now: 0, wallMs: 0)
                }
            }
        }
    }

    /// One Engine.IO text packet.
    mutating func text(_ message: ArraySlice<UInt8>) {
        let wasClosed = session.isClosed
        let connected = session.user != nil
        let actions = session.receive(message, from: transport, now: now, wallMs: 0)
        let payload = message.dropFirst()
        let isMessage = message.first == UInt8(ascii: "4")
        let isBinaryHeader = isMessage && (payload.first == UInt8(ascii: "5") || payload.first == UInt8(ascii: "6"))
        if wasClosed {
            guard actions.isEmpty else { fail("actions after close for \(fuzzShow(message)): \(actions)") }
            return
        }
        if !connected && isBinaryHeader {
            guard isConnectRefusal(actions) else { fail("binary header \(fuzzShow(message)) before CONNECT gave \(actions)") }
        }
        var binaryHandle: [UInt8]? = nil
        if connected && isMessage {
            header = payload
            fed = []
            // A `45<0>-` header is a whole binary packet.
            if isBinaryHeader { binaryHandle = Array(payload) }
        }
        check(actions, message: message, binaryHeader: binaryHandle, attachments: [])
        if !connected && !isBinaryHeader { loginIfAsked(actions) }
    }

    /// One attachment (`bytes`: what it decodes to, nil if its base64 is invalid).
    mutating func attachment(_ bytes: [UInt8]?, message: ArraySlice<UInt8>, _ feed: (inout EngineSession) -> [EngineSession.Action]) {
        let wasClosed = session.isClosed
        let connected = session.user != nil
        let actions = feed(&session)
        if wasClosed {
            guard actions.isEmpty else { fail("actions after close for attachment \(fuzzShow(message)): \(actions)") }
            return
        }
        guard connected else {
            // Skipped (the attachment of a refused header) or refused; never assembled.
            guard actions.isEmpty || isConnectRefusal(actions) else { fail("attachment \(fuzzShow(message)) before CONNECT gave \(actions)") }
            check(actions, message: message, binaryHeader: nil, attachments: [])
            return
        }
        fed.append(bytes)
        check(actions, message: message, binaryHeader: header.map(Array.init), attachments: fed)
    }

    /// `.send(44{…})`, then `.close(4003, …)` and the session closed exactly when it was the
    /// session's last refusal; else the session awaits another CONNECT.
    func isConnectRefusal(_ actions: [EngineSession.Action]) -> Bool {
        guard let first = actions.first, case .send(let out) = first, out.starts(with: "44{".utf8) else { return false }
        if actions.count == 1 { return session.phase == .awaitingConnect && refusals + 1 < session.configuration.maxConnectRefusals }
        guard actions.count == 2, case .close(CloseCode.authenticationFailed, _) = actions[1], session.isClosed else { return false }
        return true
    }

    mutating func loginIfAsked(_ actions: [EngineSession.Action]) {
        guard actions.contains(where: { if case .authenticate = $0 { return true } else { return false } }) else { return }
        let result: Result<ConnectAnswer, RelayError> = refuseLogin ? .failure(RelayError(.tokenInvalidClaims)) : .success(ConnectAnswer(user: user))
        let answer = session.connectFinished(result, now: now)
        if refuseLogin {
            guard isConnectRefusal(answer) else { fail("refused login gave \(answer)") }
            check(answer, message: [][...], binaryHeader: nil, attachments: [])
        } else {
            guard answer.count == 2, answer[0] == .limits(session.limits), !session.limits.preAuthentication,
                case .send(let out) = answer[1], out.starts(with: "40".utf8), session.user == user
            else {
                fail("login gave \(answer)")
            }
            // Refusals count since the socket last connected: after a `41` the session is what
            // it was before its first CONNECT, refusal count included.
            refusals = 0
        }
    }

    /// The generic rules, and the binary ones for a `.handle` that a binary packet produced:
    /// `binaryHeader` is its header (the Socket.IO text fed) and `attachments` what was fed since.
    mutating func check(_ actions: [EngineSession.Action], message: ArraySlice<UInt8>, binaryHeader: [UInt8]?, attachments: [[UInt8]?]) {
        for (index, action) in actions.enumerated() {
            switch action {
            case .send(let out):
                guard let type = out.first, (UInt8(ascii: "0")...UInt8(ascii: "6")).contains(type) else {
                    fail("not an Engine.IO packet: \(fuzzShow(out))")
                }
                if out.starts(with: "44{".utf8) {
                    refusals += 1
                    guard refusals <= session.configuration.maxConnectRefusals else { fail("refusal \(refusals) left the session open") }
                    if index + 1 < actions.count {
                        guard case .close(CloseCode.authenticationFailed, _) = actions[index + 1] else { fail("CONNECT_ERROR followed by \(actions)") }
                    } else {
                        guard !session.isClosed, refusals < session.configuration.maxConnectRefusals else { fail("refusal \(refusals) without its close: \(actions)") }
                    }
                }
            case .close(let code, let reason):
                closes += 1
                guard closes == 1, index == actions.count - 1, session.isClosed else {
                    fail("close \(code) \(reason) out of place: \(actions)")
                }
            case .handle(let event, let ackID, let who):
                handles += 1
                guard who == user, session.user == user else { fail("handle without the connected user: \(actions)") }
                let carried: [[UInt8]]
                if case .custom(let b) = event { carried = b.attachments } else { carried = [] }
                guard let header = binaryHeader else {
                    guard carried.isEmpty else { fail("a text event carries attachments: \(event)") }
                    continue
                }
                checkBinaryHandle(event, ackID: ackID, carried: carried, header: header, attachments: attachments, message: message)
            case .authenticate, .received, .rateLimited, .leave:
                break
            case .limits(let limits):
                guard limits == session.limits else { fail("limits \(limits) announced, \(session.limits) in force") }
            case .sendProbe, .releasePoll, .upgraded, .abortProbe:
                fail("probe action without a probe: \(actions)")
            case .sendBinary:
                fail("a binary reply nobody asked for: \(actions)")
            }
        }
        if session.isClosed && closes == 0 { fail("closed without a close action: \(actions)") }
    }

    func checkBinaryHandle(
        _ event: ClientEvent, ackID: Int64?, carried: [[UInt8]], header: [UInt8], attachments: [[UInt8]?], message: ArraySlice<UInt8>
    ) {
        guard attachments.allSatisfy({ $0 != nil }) else {
            fail("a binary event was handled with an attachment whose base64 is invalid: \(event)")
        }
        let fed = attachments.compactMap { $0 }
        guard carried == fed, fed.count <= maxAttachments else {
            fail("handled \(carried.count) attachments, fed \(fed.count) since \(fuzzShow(header)) (max \(maxAttachments)): \(event)")
        }
        guard var packet = try? SocketPacket.decode(header[...], maxAttachments: maxAttachments), packet.type == .binaryEvent,
            packet.attachmentCount == fed.count, packet.ackID == ackID
        else { fail("handled \(event) for the header \(fuzzShow(header)) with \(fed.count) attachments") }
        packet.attachmentCount = fed.count
        let headerText = packet.encodedMessage().count
        let cost = fed.reduce(headerText) { $0 + 2 + 4 * (($1.count + 2) / 3) }
        guard cost <= maxEventBytes else {
            fail("handled a binary event of recipient cost \(cost) (header \(headerText) + \(fed.map(\.count)) bytes) over maxEventBytes \(maxEventBytes): \(event)")
        }
    }

    func fail(_ message: String) -> Never {
        fatalError("\(message)\ninput (\(input.count) bytes): \(fuzzHex(input))")
    }
}
