import NIOCore
import RelayCore

/// A session's Engine.IO long-polling transport, on the session's loop: packets wait in the
/// connection's `OutboundQueue` (the same bounds in bytes and in messages, and the same
/// coalescing, as a WebSocket's) until a `GET` takes them (joined by `\x1e`), a `GET` with
/// nothing to take is held until there is (at the latest the next ping), and a second `GET`
/// while one is held is a protocol error. Sizes are what polling carries: attachments as base64.
final class PollingTransport: SessionTransport {
    /// The held `GET`, if any, and which hold it is.
    private var hold = Hold()
    private var buffer: OutboundQueue<OutboundMessage>
    /// An upgrade is under way: every `GET` is answered with `noop` at once.
    private var releasing = false
    private(set) var closed = false
    /// The WebSocket took over.
    private(set) var upgraded = false
    /// A `GET` was answered `noop` for the upgrade: the client was polling when it upgraded, so
    /// one more `GET` may still be on its way.
    private(set) var polledDuringUpgrade = false
    /// The close packet still owed to the client (the session ended while no `GET` was held).
    private(set) var owesClose = false
    /// A noop owed to the next `GET` after the client's own close: a `GET` it sent alongside its
    /// `1` may arrive after it (the protocol suite sends both at once).
    private(set) var owesNoop = false
    /// The next `GET` still gets an answer of the session's (not 400).
    var owesAnswer: Bool { owesClose || owesNoop }
    /// Whom the transport tells of violations, its end and what it dropped or coalesced.
    var observers = PollingObservers()
    private let eventLoop: any EventLoop
    private let holdMs: Int64

    static let separator = PollingPayload.separator

    private var overflowed = false

    init(eventLoop: any EventLoop, softLimitBytes: Int, hardLimitBytes: Int, maxMessages: Int, holdMs: Int64) {
        self.eventLoop = eventLoop
        self.holdMs = holdMs
        self.buffer = OutboundQueue(softLimitBytes: softLimitBytes, hardLimitBytes: hardLimitBytes, maxCount: maxMessages)
        LiveObjects.created(.pollingTransport)
    }

    deinit { LiveObjects.released(.pollingTransport) }

    /// What `message` costs on this transport: its text, then a separator, `b` and base64 for
    /// each attachment.
    static func wireBytes(_ message: OutboundMessage) -> Int {
        guard !message.attachments.isEmpty else { return message.bytes.readableBytes + 1 }
        return WireSize.polling(text: message.bytes.readableBytes + 1, attachments: message.attachments.map(\.readableBytes))
    }

    // MARK: SessionTransport

    func send(_ message: OutboundMessage) {
        guard !closed, !overflowed else { return }
        switch buffer.enqueue(message, bytes: Self.wireBytes(message), key: message.coalescingKey) {
        case .queued: break
        case .replaced: observers.onCoalesced?()
        case .overflow:
            // A poller that does not come back cannot make the buffer grow without bound.
            overflowed = true
            observers.onViolation?(CloseCode.slowConsumer, "slow consumer")
        }
    }

    func flush() {
        guard let promise = hold.request?.promise, !buffer.isEmpty else { return }
        answer(promise, with: takeBody())
    }

    /// Messages waiting for a `GET`.
    var waitingMessages: Int { buffer.count }

    /// Ends polling: the held `GET` gets Engine.IO `1` after what is buffered (`noop` when the
    /// client closed); without one, the next `GET` gets them only when the client must hear why
    /// (`CloseCode.isOwedToPoller`), else 400.
    func close(code: UInt16, reason: String) {
        guard !closed else { return }
        closed = true
        if overflowed {
            // What overflowed is not owed to a client that stopped reading: drop it, keep the close.
            if buffer.count > 0 { observers.onDropped?(buffer.count) }
            buffer.removeAll()
        }
        if let promise = hold.request?.promise {
            answer(promise, with: code == CloseCode.normal ? [UInt8(ascii: "6")] : closeBody())
        } else if code == CloseCode.normal {
            owesNoop = true
        } else {
            owesClose = CloseCode.isOwedToPoller(code)
        }
        observers.onClosed?()
    }

    /// The WebSocket took over: the held `GET` gets a noop; later ones are refused.
    func closeForUpgrade() {
        guard !closed else { return }
        closed = true
        upgraded = true
        if let promise = hold.request?.promise {
            polledDuringUpgrade = true
            answer(promise, with: [UInt8(ascii: "6")])
        }
        observers.onClosed?()
    }

    // MARK: Requests

    /// A `GET`: answered now when there is something to take, else held.
    func poll(_ promise: EventLoopPromise<HTTPResponse>) {
        if closed {
            if owesAnswer {
                promise.succeed(Self.body(owesClose ? closeBody() : [UInt8(ascii: "6")]))
                owesClose = false
                owesNoop = false
                observers.onCloseDelivered?()
                observers.onCloseDelivered = nil
            } else {
                promise.succeed(PollingEndpoint.engineError(.sessionUnknown))
            }
            return
        }
        if hold.request != nil {
            // Two GETs at once: the client broke the protocol.
            promise.succeed(PollingEndpoint.engineError(.badRequest))
            observers.onViolation?(CloseCode.protocolError, "concurrent polls")
            return
        }
        if releasing {
            polledDuringUpgrade = true
            promise.succeed(Self.body([UInt8(ascii: "6")]))
            return
        }
        if !buffer.isEmpty {
            answer(promise, with: takeBody())
            return
        }
        // Held at most until the next ping; this bound only matters if the session's timers
        // were to stop.
        hold.generation &+= 1
        let generation = hold.generation
        let timeout = eventLoop.assumeIsolated().scheduleTask(in: .milliseconds(holdMs)) { [weak self] in
            guard let self, generation == self.hold.generation, let promise = self.hold.request?.promise else { return }
            self.answer(promise, with: [UInt8(ascii: "6")])
        }
        hold.request = (promise, timeout)
    }

    /// An upgrade probe answered `3probe`: release the held `GET` with a noop, and every later one.
    func releasePendingPoll() {
        releasing = true
        if let promise = hold.request?.promise {
            polledDuringUpgrade = true
            answer(promise, with: [UInt8(ascii: "6")])
        }
    }

    /// The probe failed or closed before the upgrade: `GET`s are held again (not answered
    /// `noop` at once, which would make the client poll in a tight loop).
    func probeEnded() {
        releasing = false
    }

    /// What was sent but not yet polled, for the WebSocket that takes over.
    func takeUnsent() -> [OutboundMessage] {
        var out: [OutboundMessage] = []
        out.reserveCapacity(buffer.count)
        while let message = buffer.dequeue() { out.append(message) }
        return out
    }

    /// Forgets what is still owed (the session's sid was forgotten): nothing is kept for a
    /// client that will never poll again.
    func discard() {
        if buffer.count > 0 { observers.onDropped?(buffer.count) }
        buffer.removeAll()
        owesClose = false
        owesNoop = false
        hold.request?.timeout.cancel()
        observers = PollingObservers()
    }

    private func answer(_ promise: EventLoopPromise<HTTPResponse>, with body: [UInt8]) {
        hold.request?.timeout.cancel()
        hold.request = nil
        promise.succeed(Self.body(body))
    }

    private func takeBody() -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(buffer.queuedBytes)
        var first = true
        while let message = buffer.dequeue() {
            if !first { out.append(Self.separator) }
            first = false
            out.append(contentsOf: message.bytes.readableBytesView)
            for attachment in message.attachments {
                out.append(Self.separator)
                out.append(contentsOf: EncodedBinaryPacket.pollingPacket(forAttachment: attachment.readableBytesView))
            }
        }
        return out
    }

    private func closeBody() -> [UInt8] {
        var body = takeBody()
        if !body.isEmpty { body.append(Self.separator) }
        body.append(UInt8(ascii: "1"))
        return body
    }

    static func body(_ bytes: [UInt8]) -> HTTPResponse {
        HTTPResponse(status: .ok, contentType: "text/plain; charset=UTF-8", body: bytes)
    }

    /// A held `GET`: its answer completes on the request's own loop; held at most `holdMs`.
    ///
    /// `generation` changes with every `GET` held, and a hold's timeout carries the one it was
    /// set with, because a cancelled timeout can still run: NIO takes every due task out of its
    /// queue before it runs the batch, so a timeout due in the same tick as the tasks that
    /// answered its `GET` and held the next one (a flush, then the client's next poll, hopped
    /// from the HTTP connection's loop) is no longer there to cancel. Taken for the current
    /// one, it would answer the new `GET` with a noop long before its time.
    private struct Hold {
        var request: (promise: EventLoopPromise<HTTPResponse>, timeout: Scheduled<Void>)?
        var generation: UInt32 = 0
    }
}
