// libFuzzer target: EngineSession, the Engine.IO/Socket.IO session state machine, driven the
// way its transports drive it — including long-polling bodies.
//
// Input: a sequence of records. Each record starts with one control byte:
//   0x00–0x3F  a polling POST body follows (length = next byte), split on 0x1E into packets,
//              each fed with `from: .polling`
//   0x40–0x7F  one WebSocket message follows (length = next byte), `from: .websocket`
//   0x80–0x9F  time advances by (byte & 0x1F) × 97 ms, then `tick`
//   0xA0–0xAF  the pending authentication finishes: success (even) or failure (odd)
//   0xB0–0xB7  a probe WebSocket opens (`probeOpened`); 0xB8–0xBF it closes (`probeClosed`)
//   0xC0–0xFF  the server side (`reply`): an ack, a binary ack, an error reply; `goAway`, or
//              `close`
// The session starts on polling or WebSocket by the first byte.
//
// Checks, after every step:
// - No trap, whatever the bytes.
// - `.close` is returned at most once over the session's life; once closed, every input
//   returns no action and `nextDeadline` is nil.
// - `.handle` only while connected, with the connected user; `.authenticate` never while one is
//   pending, and again only after a `.leave` (a `41`) or a refusal (`44{…}`, which leaves the
//   session open but for the `maxConnectRefusals`th) or never; `.leave` only while connected;
//   at most `maxConnectRefusals` refusals in a row (since the session opened or its socket
//   connected), the last followed by 4003.
// - Every `.send` (and a binary reply's header) is a non-empty Engine.IO packet whose first
//   byte is a packet type 0–6.
// - `nextDeadline`, when set, is never in the past after a `tick` at that time.
// - The limits in force (`LimitsInForce`) are pre-login exactly when no user is logged in
//   (before CONNECT, while it is verified, after a `41`), every change reaches the transports
//   as a `.limits` action, and a session awaiting CONNECT always has a deadline (after `41` too).

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    guard let first = bytes.first else { return 0 }
    var c = SessionConfiguration.fuzzing
    c.heartbeat.intervalMs = 500
    c.heartbeat.timeoutMs = 300
    c.connectTimeoutMs = 700
    c.upgradeTimeoutMs = 400
    c.maxEventBytes = 512
    c.budgets.errorReplies = .init(perSecond: 2, burst: 4)
    c.budgets.events = .init(perSecond: 20, burst: 10)
    let transport: EngineSession.Transport = first & 1 == 0 ? .polling : .websocket
    var session = EngineSession(configuration: c, transport: transport, engineSID: "E", socketSID: "S", fallbackToken: "q", now: 0)
    let user = AuthenticatedUser(userID: "u", rooms: RoomAuthorization(patterns: ["conversation:*"]), expiresAt: .max)
    var now: Int64 = 0
    var closes = 0
    var authenticates = 0
    var leaves = 0
    var refusals = 0
    /// Refusals since the session opened or its socket last connected (a `41` starts the
    /// count again: the session is then what it was before its first CONNECT).
    var refusalsInARow = 0
    var authenticating = false
    var connectedBefore = false
    // What the transports were told of the limits in force (a new session starts pre-login).
    var announced = session.limits

    func check(_ actions: [EngineSession.Action], wasClosed: Bool) {
        if wasClosed && !actions.isEmpty { fatalError("actions after close: \(actions)") }
        for action in actions {
            switch action {
            case .close:
                closes += 1
                if closes > 1 { fatalError("a second close: \(actions)") }
            case .send(let packet), .sendProbe(let packet), .sendBinary(let packet, _):
                guard let type = packet.first, (UInt8(ascii: "0")...UInt8(ascii: "6")).contains(type) else {
                    fatalError("not an Engine.IO packet: \(packet)")
                }
                if packet.starts(with: "44{".utf8) {
                    refusals += 1
                    refusalsInARow += 1
                    if refusalsInARow > c.maxConnectRefusals { fatalError("refusal \(refusalsInARow) left the session open") }
                    if refusalsInARow == c.maxConnectRefusals, !session.isClosed { fatalError("the last refusal without its close") }
                }
            case .handle(_, _, let who):
                guard session.user == who, who == user else { fatalError("handle without the connected user") }
            case .authenticate:
                if authenticating { fatalError("authenticate while one is pending") }
                authenticates += 1
                authenticating = true
                if authenticates > leaves + refusals + 1 { fatalError("authenticate again without a 41 or a refusal") }
            case .leave:
                if !connectedBefore { fatalError("leave without a connected socket") }
                leaves += 1
            case .limits(let limits):
                announced = limits
                if !limits.preAuthentication { refusalsInARow = 0 }
            case .releasePoll, .upgraded, .abortProbe, .received, .rateLimited:
                break
            }
        }
        if session.isClosed && session.nextDeadline != nil { fatalError("a deadline after close") }
        if !session.isClosed {
            // The transports always enforce the state's limits: pre-login exactly when no one is
            // logged in (before CONNECT, while verifying, after a 41), and told of every change.
            guard announced == session.limits else { fatalError("transports enforce \(announced), the state says \(session.limits)") }
            guard session.limits.preAuthentication == (session.user == nil) else { fatalError("limits \(session.limits) with user \(String(describing: session.user))") }
            if case .awaitingConnect = session.lifecycle, session.nextDeadline == nil { fatalError("awaiting CONNECT without a deadline") }
        }
    }

    check(session.start(now: now), wasClosed: false)
    var i = 1
    while i < bytes.count {
        let control = bytes[i]
        i += 1
        let wasClosed = session.isClosed
        connectedBefore = session.user != nil
        switch control {
        case 0x00...0x7F:
            guard i < bytes.count else { break }
            let length = Int(bytes[i])
            i += 1
            let end = min(bytes.count, i + length)
            let payload = bytes[i..<end]
            i = end
            if control < 0x40 {
                for packet in payload.split(separator: 0x1E, omittingEmptySubsequences: false) {
                    let closedBefore = session.isClosed
                    check(session.receive(packet, from: .polling, now: now, wallMs: now), wasClosed: closedBefore)
                }
            } else {
                check(session.receive(payload, from: .websocket, now: now, wallMs: now), wasClosed: wasClosed)
            }
        case 0x80...0x9F:
            now += Int64(control & 0x1F) * 97
            check(session.tick(now: now), wasClosed: wasClosed)
            if let deadline = session.nextDeadline, deadline < now { fatalError("deadline \(deadline) in the past at \(now)") }
        case 0xA0...0xAF:
            let result: Result<ConnectAnswer, RelayError> = control & 1 == 0 ? .success(ConnectAnswer(user: user)) : .failure(RelayError(.tokenExpired))
            let actions = session.connectFinished(result, now: now)
            if !authenticating && !actions.isEmpty { fatalError("connectFinished acted without an authentication") }
            authenticating = false
            check(actions, wasClosed: wasClosed)
        case 0xB0...0xB7:
            check(session.probeOpened(now: now).filter { if case .abortProbe = $0 { return false } else { return true } }, wasClosed: wasClosed)
        case 0xB8...0xBF:
            session.probeClosed()
        case 0xC0...0xC7:
            check(session.reply(.ack(id: Int64(control & 0x07), payload: .object([("ok", true)])), now: now), wasClosed: wasClosed)
        case 0xC8...0xCF:
            let reply = EngineSession.Reply.binaryAck(id: Int64(control & 0x07), payload: .object([("b", BinaryPlaceholder.json(0))]), attachments: [[control]])
            check(session.reply(reply, now: now), wasClosed: wasClosed)
        case 0xD0...0xDF:
            check(session.reply(.failure(RelayError(.invalidPayload), event: "x:y", ackID: Int64(control & 0x0F)), now: now), wasClosed: wasClosed)
        case 0xE0...0xEF:
            check(session.goAway(), wasClosed: wasClosed)
        default:
            check(session.close(code: CloseCode.kicked, reason: "kicked"), wasClosed: wasClosed)
        }
    }
    return 0
}
