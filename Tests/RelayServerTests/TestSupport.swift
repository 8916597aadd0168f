import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOEmbedded
import NIOWebSocket
import RelayCore
import RelayStore
import XCTest

@testable import RelayServer
@testable import RelayBackends

/// A clock the test moves by hand.
final class ManualClock: Sendable {
    private let now = NIOLockedValueBox<Int64>(1_000_000)
    var relayClock: RelayClock {
        RelayClock(monotonicMs: { self.now.withLockedValue { $0 } }, wallMs: { 1_700_000_000_000 + self.now.withLockedValue { $0 } })
    }
    func advance(ms: Int64) { now.withLockedValue { $0 += ms } }
}

/// A receipt store whose commits the test completes by hand.
final class ControlledReceiptStore: ReceiptStore, @unchecked Sendable {
    struct Pending {
        var receipt: NewReceipt
        var promise: EventLoopPromise<RecordedReceipt>
    }
    private let lock = NIOLock()
    private var _pending: [Pending] = []
    var pending: [Pending] { lock.withLock { _pending } }

    func record(_ receipt: NewReceipt, on eventLoop: any EventLoop) -> EventLoopFuture<RecordedReceipt> {
        let promise = eventLoop.makePromise(of: RecordedReceipt.self)
        lock.withLock { _pending.append(Pending(receipt: receipt, promise: promise)) }
        return promise.futureResult
    }
    func sync(authorID: String, since: Int64, limit: Int, on eventLoop: any EventLoop) -> EventLoopFuture<[Receipt]> {
        eventLoop.makeSucceededFuture([])
    }
    func receipts(messageID: String, limit: Int, on eventLoop: any EventLoop) -> EventLoopFuture<[Receipt]> {
        eventLoop.makeSucceededFuture([])
    }
    func checkWritable(on eventLoop: any EventLoop) -> EventLoopFuture<Void> { eventLoop.makeSucceededVoidFuture() }
    /// Completes the oldest pending write as committed with cursor `id`.
    func commitNext(id: Int64) {
        let p = lock.withLock { _pending.removeFirst() }
        p.promise.succeed(RecordedReceipt(receipt: Receipt(id: id, p.receipt), isNew: true))
    }
    func failNext() {
        let p = lock.withLock { _pending.removeFirst() }
        p.promise.fail(ReceiptStoreError.unavailable("disk full"))
    }
}

/// Token checks the test answers by hand: a CONNECT with the token `hold:<user>` waits here.
final class HeldAuthentications: Sendable {
    private let waiting = NIOLockedValueBox<[(user: String, promise: EventLoopPromise<Result<AuthenticatedUser, RelayError>>)]>([])

    var count: Int { waiting.withLockedValue { $0.count } }

    func wait(user: String, on loop: any EventLoop) -> EventLoopFuture<Result<AuthenticatedUser, RelayError>> {
        let promise = loop.makePromise(of: Result<AuthenticatedUser, RelayError>.self)
        waiting.withLockedValue { $0.append((user, promise)) }
        return promise.futureResult
    }

    /// Answers the oldest held check: the user's token is valid, or refused with `error`.
    func answerNext(refusing error: RelayErrorCode? = nil) {
        let next = waiting.withLockedValue { $0.removeFirst() }
        if let error {
            next.promise.succeed(.failure(RelayError(error)))
        } else {
            next.promise.succeed(.success(AuthenticatedUser(userID: next.user, rooms: RoomAuthorization(patterns: ["conversation:*"]), expiresAt: .max)))
        }
    }
}

/// One relay hub on an `EmbeddedEventLoop` with sessions driven frame by frame.
final class Harness {
    let loop = EmbeddedEventLoop()
    let clock = ManualClock()
    let store = ControlledReceiptStore()
    let held = HeldAuthentications()
    let relay: RelayContext
    var configuration: RelayConfiguration

    /// Tokens are looked up in this table instead of being verified (TokenVerifier has its own tests).
    init(configure: (inout RelayConfiguration) -> Void = { _ in }, broker: ((RelayConfiguration, RelayClock) -> any Broker)? = nil) {
        var c = RelayConfiguration(jwt: .hs256(secret: String(repeating: "s", count: 32)), apiKey: String(repeating: "a", count: 16), adminKey: String(repeating: "b", count: 16))
        c.engine.pingIntervalMs = 25_000
        c.engine.pingTimeoutMs = 20_000
        configure(&c)
        configuration = c
        let hub = Hub(eventLoops: [loop], configuration: c, clock: clock.relayClock, broker: broker?(c, clock.relayClock))
        let held = self.held
        relay = RelayContext(configuration: c, hub: hub, receipts: store, logger: Logger(label: "test")) { token, loop in
            if token.hasPrefix("hold:") { return held.wait(user: String(token.dropFirst(5)), on: loop) }
            let users: [String: AuthenticatedUser] = [
                "alice": AuthenticatedUser(userID: "alice", rooms: RoomAuthorization(patterns: ["conversation:*"]), expiresAt: .max),
                "bob": AuthenticatedUser(userID: "bob", rooms: RoomAuthorization(patterns: ["conversation:*"]), expiresAt: .max),
                "carol": AuthenticatedUser(userID: "carol", rooms: RoomAuthorization(patterns: ["conversation:*"]), expiresAt: .max),
            ]
            if let user = users[token] { return loop.makeSucceededFuture(.success(user)) }
            // "jwt:<user>:<exp s>:<iat s>:<room pattern>" stands for a token with those claims.
            let parts = token.split(separator: ":", maxSplits: 4).map(String.init)
            if parts.count == 5, parts[0] == "jwt", let exp = Int64(parts[2]), let iat = Int64(parts[3]) {
                return loop.makeSucceededFuture(.success(AuthenticatedUser(userID: parts[1], rooms: RoomAuthorization(patterns: [parts[4]]), expiresAt: exp, issuedAt: iat)))
            }
            return loop.makeSucceededFuture(.failure(RelayError(.tokenBadSignature)))
        }
    }

    func session(ip: String = "127.0.0.1") throws -> Session {
        let channel = EmbeddedChannel(loop: loop)
        try channel.pipeline.syncOperations.addHandler(WebSocketTransport(relay: relay, handshake: HandshakeInfo(remoteIP: ip)))
        return Session(channel: channel)
    }

    /// Moves the clock and the loop's timers together.
    func advance(ms: Int64) {
        clock.advance(ms: ms)
        loop.advanceTime(by: .milliseconds(ms))
    }
}

/// One client socket as frames in and out of an `EmbeddedChannel`.
struct Session {
    let channel: EmbeddedChannel

    func send(_ text: String, fin: Bool = true, opcode: WebSocketOpcode = .text) throws {
        try sendBytes(Array(text.utf8), fin: fin, opcode: opcode)
    }

    func sendBytes(_ bytes: [UInt8], fin: Bool = true, opcode: WebSocketOpcode = .text, masked: Bool = true, rsv1: Bool = false) throws {
        var buffer = channel.allocator.buffer(capacity: bytes.count)
        buffer.writeBytes(bytes)
        let key: WebSocketMaskingKey? = masked ? WebSocketMaskingKey([1, 2, 3, 4]) : nil
        if let key { buffer.webSocketMask(key) }
        try channel.writeInbound(WebSocketFrame(fin: fin, rsv1: rsv1, opcode: opcode, maskKey: key, data: buffer))
    }

    /// Every frame written since the last call (after running the loop's pending tasks, such
    /// as the per-iteration flush of fan-out writes).
    func frames() throws -> [WebSocketFrame] {
        channel.embeddedEventLoop.run()
        var out: [WebSocketFrame] = []
        while let frame = try channel.readOutbound(as: WebSocketFrame.self) { out.append(frame) }
        return out
    }

    /// The text of every text frame written since the last call.
    func texts() throws -> [String] {
        try frames().filter { $0.opcode == .text }.map { String(buffer: $0.data) }
    }

    /// The close code of the close frame written since the last call, if any.
    func closeCode() throws -> UInt16? {
        try frames().first { $0.opcode == .connectionClose }.flatMap { frame in
            var data = frame.data
            return data.readInteger(as: UInt16.self)
        }
    }

    /// Opens the session with CONNECT for `token`; returns the Socket.IO sid.
    @discardableResult
    func connect(_ token: String) throws -> String {
        _ = try texts()
        try send("40{\"token\":\"\(token)\"}")
        let reply = try texts()
        guard let first = reply.first, first.hasPrefix("40{") else {
            XCTFail("expected 40{sid}, got \(reply)")
            return ""
        }
        return first
    }
}
