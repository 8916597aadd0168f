/// What one connection may send, whatever carries it: the same budget for a WebSocket and for
/// long-polling, before and after CONNECT, for text packets and binary attachments alike.
/// Transports only report what arrived; `EngineSession` asks this budget.
///
/// - Every Engine.IO packet (a ping, a noop, an event, one attachment) and every WebSocket
///   control frame spends one packet token and its size in bytes: a flood of tiny packets
///   (each answered, or each held) or of large ones (each parsed) is closed with 1008 instead
///   of growing what the relay buffers or spends for it.
/// - Every client event spends its size from the event-bytes budget, measured as what it costs
///   each recipient (a binary event's attachments as base64, as long-polling carries them): one
///   sender cannot push a burst into a room that no recipient's outbound budget can hold. Over
///   it the event is refused with `rate_limited`, like the event-count budgets.
public struct InboundBudget: Sendable {
    public struct Limits: Sendable, Equatable {
        /// Engine.IO packets per second and burst (binary attachments count one each).
        public var packets: EventRateLimiter.Budget
        /// Bytes of those packets per second and burst.
        public var bytes: EventRateLimiter.Budget
        /// Client event bytes per second and burst, as recipients are charged.
        public var eventBytes: EventRateLimiter.Budget
        /// The longest data a client ping may carry (Engine.IO clients send `2probe` at most):
        /// every ping is answered with its data, so it is bounded.
        public var maxPingBytes: Int

        /// `maxPingBytes`'s default is the protocol's (no setting): `2probe` with room to spare.
        public init(
            packets: EventRateLimiter.Budget, bytes: EventRateLimiter.Budget, eventBytes: EventRateLimiter.Budget,
            maxPingBytes: Int = 64
        ) {
            self.packets = packets
            self.bytes = bytes
            self.eventBytes = eventBytes
            self.maxPingBytes = maxPingBytes
        }
    }

    // Only the levels: the limits are the configuration's, passed in (16 bytes a bucket per
    // session instead of 32).
    private var packets: BucketLevel
    private var bytes: BucketLevel
    private var eventBytes: BucketLevel

    public init(limits: Limits, now: Int64) {
        packets = BucketLevel(limits.packets, now: now)
        bytes = BucketLevel(limits.bytes, now: now)
        eventBytes = BucketLevel(limits.eventBytes, now: now)
    }

    /// One packet of `size` bytes arrived; `false` when the connection is over its packet or
    /// byte rate. `limits`: the ones the budget was made with.
    public mutating func takePacket(size: Int, limits: Limits, now: Int64) -> Bool {
        packets.tryConsume(1, limits.packets, now: now) && bytes.tryConsume(Double(size), limits.bytes, now: now)
    }

    /// An event of `bytes` (as recipients are charged) may go out; `false` refuses it and
    /// spends nothing. `limits`: the ones the budget was made with.
    public mutating func takeEventBytes(_ bytes: Int, limits: Limits, now: Int64) -> Bool {
        eventBytes.tryConsume(Double(bytes), limits.eventBytes, now: now)
    }
}
