// libFuzzer target: PollingPayload, the long-polling body parser, and EngineSession fed every
// packet of the bodies the way the polling endpoint feeds them (`receive(_:from: .polling, …)`,
// packet by packet, no more once a `.close` came).
//
// Input: byte 0 chooses the session:
//   bit 0     the harness sends `40` and completes the login before the first body (connected)
//   bit 1     a pending login completes right after the packet that asked for it (else only
//             after the rest of its body, as the server's asynchronous verification does)
//   bit 2     the login fails (CONNECT_ERROR; the session stays open, the third closes 4003)
//   bits 3-4  the packet budget's refill: 0, 125, 250 or 1000 packets/s
//   bits 5-6  its burst: 20, 1, 5 or 64 packets
//   bit 7     `inbound.maxPingBytes` 6 instead of 64
// Byte 1: the clock. Time advances by (low nibble) ms before every packet and by
// (high nibble) × 64 ms between bodies; it starts at 0, where the session is created. The
// harness never calls `tick`, so no heartbeat or timeout interferes.
// The rest: POST bodies, each a 2-byte big-endian length followed by that many bytes (the last
// one may be cut short by the end of the input).
//
// Checks:
// 1. PollingPayload, on every body (a slice that does not start at index 0): the packets are
//    consecutive slices of the body without 0x1E; joined with 0x1E they give back exactly the
//    body; there are (count of 0x1E) + 1 of them; `next()` stays nil at the end; no trap.
// 2. The packet budget (`inbound.packets`), against an exact integer model of its token bucket
//    (the refill rates are chosen so that the session's Double arithmetic is exact): the
//    session closes with 1008 "too many packets" exactly when the model's bucket is empty, and
//    the number of packets it answered or acted on is never above burst + refills
//    (burst + elapsed ms × rate / 1000).
// 3. `.close` comes at most once, last in its action list, and leaves the session `.closed`;
//    after it, a further packet or a late login answer gives no action at all.
// 4. A ping `2<data>` is answered with exactly `3<data>` when its data (as UTF-8) is at most
//    `maxPingBytes` long, and closes with 1002 otherwise.
// 5. The bytes of `.send` actions are linear in what was accepted: each packet's answer
//    (including a CONNECT answer it asked for) is at most 1024 + 4 × its size (an error reply
//    may echo a refused event name, JSON-escaped), so the total is at most the sum of that over
//    the accepted packets.
// 6. `.authenticate` again only after a `.leave` (a `41`) or a refusal (`44{…}`, which leaves
//    the session open but for the `maxConnectRefusals`th), never while one is pending; `.leave`
//    only while connected; `.handle` only while connected, with the connected user; no
//    probe or upgrade action (no WebSocket is involved).

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let input = Array(UnsafeBufferPointer(start: data, count: size))
    guard input.count >= 2 else { return 0 }
    var harness = PollingHarness(input: input)
    harness.run()
    return 0
}

private let maxAnswerOverhead = 1024
private let maxAnswerPerByte = 4

private struct PollingHarness {
    let input: [UInt8]
    let connectFirst: Bool
    let answerAtOnce: Bool
    let refuseLogin: Bool
    let rate: Int64
    let burst: Int64
    let maxPingBytes: Int
    let step: Int64
    let gap: Int64
    let user = AuthenticatedUser(userID: "u", rooms: RoomAuthorization(patterns: ["conversation:*"]), expiresAt: .max)

    var session: EngineSession
    var now: Int64 = 0
    /// The model of the packet bucket, in thousandths of a packet.
    var tokens: Int64
    var last: Int64 = 0
    /// Packets that got past the budget.
    var accepted = 0
    var sentBytes = 0
    var allowedBytes = 0
    var closes = 0
    var authenticates = 0
    var leaves = 0
    /// CONNECT_ERRORs to the main namespace so far.
    var refusals = 0
    var pendingLogin = false

    init(input: [UInt8]) {
        self.input = input
        let flags = input[0]
        connectFirst = flags & 0x01 != 0
        answerAtOnce = flags & 0x02 != 0
        refuseLogin = flags & 0x04 != 0
        rate = [0, 125, 250, 1000][Int(flags >> 3) & 3]
        burst = [20, 1, 5, 64][Int(flags >> 5) & 3]
        maxPingBytes = flags & 0x80 == 0 ? 64 : 6
        step = Int64(input[1] & 0x0F)
        gap = Int64(input[1] >> 4) * 64
        var c = SessionConfiguration.fuzzing
        c.maxEventBytes = 1024
        c.budgets.inbound.packets = .init(perSecond: Double(rate), burst: Double(burst))
        c.budgets.inbound.maxPingBytes = maxPingBytes
        session = EngineSession(configuration: c, transport: .polling, engineSID: "E", socketSID: "S", now: 0)
        tokens = burst * 1000
    }

    mutating func run() {
        let open = session.start(now: now)
        guard open.count == 1, case .send(let packet) = open[0], packet.first == UInt8(ascii: "0") else { fail("start gave \(open)") }

        if connectFirst {
            _ = feed([UInt8(ascii: "4"), UInt8(ascii: "0")][...])
            if pendingLogin { finishLogin() }
        }

        var i = 2
        while i + 2 <= input.count {
            let length = Int(input[i]) << 8 | Int(input[i + 1])
            i += 2
            let end = min(input.count, i + length)
            let body = input[i..<end]
            i = end
            checkSplit(body)
            if session.isClosed {
                // Nothing more for a closed session, whatever comes.
                if let first = PollingPayload(body).first(where: { _ in true }) { _ = feed(first) }
                continue
            }
            var packets = PollingPayload(body)
            while let packet = packets.next() {
                guard feed(packet) else {
                    // The server stops here; one more packet must change nothing.
                    if let next = packets.next() { _ = feed(next) }
                    break
                }
            }
            now += gap
            if pendingLogin { finishLogin() }
        }
        if pendingLogin { finishLogin() }
        guard sentBytes <= allowedBytes else { fail("sent \(sentBytes) bytes for \(accepted) packets, at most \(allowedBytes) allowed") }
    }

    /// Feeds one packet of a body; `false` once the session is closed.
    mutating func feed(_ packet: ArraySlice<UInt8>) -> Bool {
        now += step
        let wasClosed = session.isClosed
        var admitted = false
        if !wasClosed {
            if now > last {
                tokens = min(burst * 1000, tokens + (now - last) * rate)
                last = now
            }
            admitted = tokens >= 1000
            if admitted { tokens -= 1000 }
        }
        let connectedBefore = session.user != nil
        let actions = session.receive(packet, from: .polling, now: now, wallMs: now)
        if wasClosed {
            guard actions.isEmpty, session.phase == .closed else { fail("actions after close for \(fuzzShow(packet)): \(actions)") }
            return false
        }
        guard admitted else {
            guard actions == [.close(code: CloseCode.policyViolation, reason: "too many packets")], session.phase == .closed else {
                fail("packet \(accepted + 1) at \(now) ms with the model's bucket empty (burst \(burst), \(rate)/s) gave \(actions)")
            }
            closes += 1
            guard closes == 1 else { fail("a second close: \(actions)") }
            return false
        }
        accepted += 1
        guard accepted * 1000 <= burst * 1000 + now * rate else {
            fail("\(accepted) packets accepted by \(now) ms with burst \(burst) and \(rate)/s")
        }
        allowedBytes += maxAnswerOverhead + maxAnswerPerByte * packet.count

        if packet.first == UInt8(ascii: "2") {
            let data = String(decoding: packet.dropFirst(), as: UTF8.self)
            let expected: [EngineSession.Action] =
                data.utf8.count <= maxPingBytes
                ? [.send(Array(("3" + data).utf8))] : [.close(code: CloseCode.protocolError, reason: "ping data too long")]
            guard actions == expected else { fail("ping \(fuzzShow(packet)) (max \(maxPingBytes) bytes) gave \(actions), expected \(expected)") }
        }

        var bytes = 0
        for (index, action) in actions.enumerated() {
            switch action {
            case .send(let out):
                guard let type = out.first, (UInt8(ascii: "0")...UInt8(ascii: "6")).contains(type) else {
                    fail("not an Engine.IO packet: \(fuzzShow(out))")
                }
                bytes += out.count
                if out.starts(with: "44{".utf8) { refusals += 1 }
            case .close(let code, let reason):
                closes += 1
                guard closes == 1, index == actions.count - 1, session.phase == .closed else {
                    fail("close \(code) \(reason) out of place: \(actions), phase \(session.phase)")
                }
                guard !(code == CloseCode.policyViolation && reason == "too many packets") else {
                    fail("closed for too many packets with \(tokens) thousandths of a packet left: packet \(fuzzShow(packet))")
                }
            case .authenticate:
                authenticates += 1
                guard authenticates <= leaves + refusals + 1, !pendingLogin, session.phase == .authenticating else {
                    fail("authenticate again without a 41, or in phase \(session.phase)")
                }
                pendingLogin = true
            case .leave:
                guard connectedBefore else { fail("leave without a connected socket: \(actions)") }
                leaves += 1
            case .handle(_, _, let who):
                guard session.user == who, who == user else { fail("handle without the connected user: \(actions)") }
            case .received, .rateLimited:
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
        if session.isClosed {
            // A late login answer changes nothing either.
            if pendingLogin { finishLogin() }
        } else if pendingLogin && answerAtOnce {
            bytes += finishLogin()
        }
        guard bytes <= maxAnswerOverhead + maxAnswerPerByte * packet.count else {
            fail("\(bytes) bytes sent for a packet of \(packet.count) bytes \(fuzzShow(packet)): \(actions)")
        }
        sentBytes += bytes
        return !session.isClosed
    }

    /// The verifier answers the pending `.authenticate`. Returns the bytes sent.
    @discardableResult
    mutating func finishLogin() -> Int {
        pendingLogin = false
        let wasClosed = session.isClosed
        let result: Result<ConnectAnswer, RelayError> = refuseLogin ? .failure(RelayError(.tokenInvalidClaims)) : .success(ConnectAnswer(user: user))
        let actions = session.connectFinished(result, now: now)
        if wasClosed {
            guard actions.isEmpty else { fail("login answered after close: \(actions)") }
            return 0
        }
        if refuseLogin {
            guard let first = actions.first, case .send(let out) = first, out.starts(with: "44{".utf8) else { fail("refused login gave \(actions)") }
            refusals += 1
            let last = refusals >= session.configuration.maxConnectRefusals
            if last {
                guard actions.count == 2, case .close(CloseCode.authenticationFailed, _) = actions[1], session.phase == .closed else {
                    fail("refusal \(refusals) gave \(actions)")
                }
                closes += 1
                guard closes == 1 else { fail("a second close: \(actions)") }
            } else {
                guard actions.count == 1, session.phase == .awaitingConnect else { fail("refusal \(refusals) gave \(actions), phase \(session.phase)") }
            }
            return out.count
        }
        // The limits of the connected state first (to every transport), then the answer.
        guard actions.count == 2, actions[0] == .limits(session.limits), !session.limits.preAuthentication,
            case .send(let out) = actions[1], out.starts(with: "40".utf8), session.user == user
        else {
            fail("login gave \(actions), phase \(session.phase)")
        }
        return out.count
    }

    func checkSplit(_ body: ArraySlice<UInt8>) {
        var payload = PollingPayload(body)
        var joined: [UInt8] = []
        joined.reserveCapacity(body.count)
        var count = 0
        var start = body.startIndex
        while let packet = payload.next() {
            guard packet.startIndex == start, packet.endIndex <= body.endIndex, !packet.contains(PollingPayload.separator) else {
                fail("packet \(count) is \(packet.startIndex)..<\(packet.endIndex), expected to start at \(start), body \(body.startIndex)..<\(body.endIndex)")
            }
            if count > 0 { joined.append(PollingPayload.separator) }
            joined.append(contentsOf: packet)
            count += 1
            start = packet.endIndex + 1
            guard count <= body.count + 1 else { fail("more packets than bytes in a body of \(body.count)") }
        }
        guard payload.next() == nil else { fail("next() after the end gave a packet") }
        let separators = body.reduce(0) { $0 + ($1 == PollingPayload.separator ? 1 : 0) }
        guard count == separators + 1, start == body.endIndex + 1 else {
            fail("\(count) packets for \(separators) separators, last ends at \(start - 1) of \(body.endIndex)")
        }
        guard joined.elementsEqual(body) else { fail("joined packets \(fuzzShow(joined)) differ from the body \(fuzzShow(body))") }
    }

    func fail(_ message: String) -> Never {
        fatalError("\(message)\ninput (\(input.count) bytes): \(fuzzHex(input))")
    }
}
