import NIOConcurrencyHelpers
import NIOCore
import NIOEmbedded
import RelayCore
import XCTest

@testable import RelayServer
@testable import RelayBackends

/// A memory broker whose stream subscriptions complete only when the test says: CONNECT setup
/// then waits, as it does on a slow Redis, and hub deliveries are held for the socket meanwhile.
final class DeferredBroker: ForwardingBroker, @unchecked Sendable {  // `pending` is guarded by `lock`
    private let lock = NIOLock()
    private var pending: [EventLoopPromise<Void>] = []

    func release() {
        let all = lock.withLock { () -> [EventLoopPromise<Void>] in
            defer { pending = [] }
            return pending
        }
        for p in all { p.succeed() }
    }

    override func whenSubscribed(_ stream: StreamKey, on loop: any EventLoop) -> EventLoopFuture<Void> {
        let promise = loop.makePromise(of: Void.self)
        lock.withLock { pending.append(promise) }
        return promise.futureResult
    }
}

final class HoldingLimitTests: XCTestCase {
    private var broker: DeferredBroker?

    private func harness(_ configure: @escaping (inout RelayConfiguration) -> Void = { _ in }) -> Harness {
        Harness(configure: configure, broker: { c, clock in
            let b = DeferredBroker(MemoryBroker(limits: c.recovery.historyLimits, wallMs: clock.wallMs))
            self.broker = b
            return b
        })
    }

    private func tick(_ s: Session, _ n: Int, pad: Int = 0) throws {
        try s.send("42[\"chat:tick\",{\"room\":\"conversation:1\",\"n\":\(n),\"pad\":\"\(String(repeating: "p", count: pad))\"}]")
    }

    /// Live events that arrive while CONNECT is set up come after the answer, in order (a
    /// recoverable event at or before the answer's offset is history, not held).
    func testHeldDeliveriesFollowTheAnswerInOrder() throws {
        let h = harness()
        let alice = try h.session()
        try alice.connect("alice")
        try alice.send("420[\"room:join\",{\"room\":\"conversation:1\"}]")
        broker?.release()
        try alice.send("421[\"location:share-live\",{\"room\":\"conversation:1\",\"durationSec\":60}]")
        _ = try alice.texts()
        let bob = try h.session()
        _ = try bob.texts()
        try bob.send("40{\"token\":\"bob\",\"rooms\":[\"conversation:1\"]}")
        XCTAssertEqual(try bob.texts(), [], "no answer while the stream subscription is pending")
        for n in 1...3 { try alice.send("42[\"location:update\",{\"room\":\"conversation:1\",\"lat\":\(n),\"lng\":2}]") }
        XCTAssertEqual(try bob.texts(), [], "held")
        broker?.release()
        let got = try bob.texts()
        XCTAssertTrue(got.first?.hasPrefix("40{") == true, "\(got)")
        let updates = got.filter { $0.contains("location:update") }
        XCTAssertEqual(updates.count, 3, "\(got)")
        XCTAssertTrue(updates[0].contains("\"lat\":1") && updates[2].contains("\"lat\":3"), "\(updates)")
    }

    /// A flood of room events while CONNECT waits is bounded like the outbound queue: over the
    /// hard limit the socket is closed 4008 instead of holding everything.
    func testHoldingPastTheHardLimitCloses4008() throws {
        let h = harness { $0.connections.outboundHardLimitBytes = 4_000 }
        let alice = try h.session()
        try alice.connect("alice")
        try alice.send("420[\"room:join\",{\"room\":\"conversation:1\"}]")
        broker?.release()
        _ = try alice.texts()
        let bob = try h.session()
        _ = try bob.texts()
        try bob.send("40{\"token\":\"bob\",\"rooms\":[\"conversation:1\"]}")
        for n in 1...200 { try tick(alice, n, pad: 100) }
        XCTAssertEqual(try bob.closeCode(), CloseCode.slowConsumer)
        let held = try XCTUnwrap(h.relay.hub.partition(for: h.loop).sink(ConnectionID(2)) as? ClientSession?)
        XCTAssertLessThanOrEqual(held?.heldBytes ?? 0, 4_000)
        broker?.release()
        XCTAssertFalse(try bob.texts().contains { $0.hasPrefix("40{") }, "never answered after the close")
    }
}
