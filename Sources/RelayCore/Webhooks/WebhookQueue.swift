/// One webhook target's bounded queue and batcher, as a value type fed events and time.
///
/// Events wait in a FIFO; a batch of at most `batchSize` leaves when that many are waiting or
/// when the oldest has waited `flushMs`. One batch is in flight at a time: it is retried (same
/// events, same sequence number) with the `WebhookRetryPolicy` until it succeeds or runs out of
/// attempts, and only then does the next batch leave — so a target sees events in order.
/// Events waiting plus the batch in flight never exceed `capacity` events nor `capacityBytes`
/// bytes (as the caller measures them): beyond either `enqueue` refuses (the caller counts the
/// drop), so a backend that is down holds a bounded amount of memory whatever the events weigh. No clock is read and nothing sleeps: the caller passes `now`
/// (monotonic ms) and the randomness, and asks `poll` what to do next.
public struct WebhookQueue<Event: Sendable>: Sendable {
    public struct Options: Sendable, Equatable {
        public var batchSize: Int
        public var flushMs: Int64
        public var capacity: Int
        public var capacityBytes: Int
        public var retry: WebhookRetryPolicy

        public init(
            batchSize: Int, flushMs: Int64, capacity: Int, capacityBytes: Int, retry: WebhookRetryPolicy
        ) {
            self.batchSize = max(1, batchSize)
            self.flushMs = max(0, flushMs)
            self.capacity = max(1, capacity)
            self.capacityBytes = max(1, capacityBytes)
            self.retry = retry
        }
    }

    /// A batch: its sequence number (stable across its attempts), its events, and which
    /// attempt this is (1, 2, …).
    public struct Batch: Sendable {
        public var sequence: UInt64
        public var events: [Event]
        public var attempt: Int
        /// When its oldest event was enqueued.
        public var oldestEnqueuedAt: Int64
        /// Its events' bytes, as they were enqueued.
        public var bytes: Int = 0
    }

    public enum Action: Sendable {
        /// Send this batch now (then report `finished`).
        case send(Batch)
        /// Nothing to do before this time (poll again then, or when an event arrives).
        case wait(until: Int64)
        /// Nothing to do until an event arrives or a send finishes.
        case idle
    }

    public enum Outcome: Sendable, Equatable {
        /// The batch was delivered: `events` of them, `latencyMs` after its oldest was enqueued.
        case delivered(events: Int, latencyMs: Int64)
        /// It will be retried at `at` (attempt `attempt` failed).
        case retry(at: Int64, attempt: Int)
        /// It failed `attempts` times and is dropped with its `events`.
        case gaveUp(events: Int, attempts: Int)
    }

    public let options: Options
    private var waiting = FIFO<(event: Event, at: Int64, bytes: Int)>()
    private var waitingBytes = 0
    private var current: Batch?
    private var inFlight = false
    private var retryAt: Int64?
    private var nextSequence: UInt64 = 1

    public init(options: Options) {
        self.options = options
    }

    /// Events waiting plus those of the batch in flight (or waiting for its retry).
    public var depth: Int { waiting.count + (current?.events.count ?? 0) }
    public var isEmpty: Bool { depth == 0 }
    /// Bytes of the events waiting plus those of the batch in flight.
    public var queuedBytes: Int { waitingBytes + (current?.bytes ?? 0) }

    /// Adds an event of `bytes`; `false` when the queue is full in events or in bytes (the
    /// event is dropped).
    public mutating func enqueue(_ event: Event, bytes: Int = 0, now: Int64) -> Bool {
        let size = max(0, bytes)
        guard depth < options.capacity, size <= options.capacityBytes - queuedBytes else { return false }
        waiting.append((event, now, size))
        waitingBytes += size
        return true
    }

    /// When `poll` next has something to do: `now` or later, or `nil` (idle, or a send in flight).
    public func nextDue(now: Int64) -> Int64? {
        if inFlight { return nil }
        if current != nil { return max(now, retryAt ?? now) }
        guard let first = waiting.first else { return nil }
        if waiting.count >= options.batchSize { return now }
        return max(now, first.at + options.flushMs)
    }

    /// What to do now. `flushAll` sends whatever is waiting without waiting for `flushMs`
    /// (shutdown) — retries still wait for their backoff.
    public mutating func poll(now: Int64, flushAll: Bool = false) -> Action {
        if inFlight { return .idle }
        if var batch = current {
            if let at = retryAt, now < at { return .wait(until: at) }
            batch.attempt += 1
            current = batch
            retryAt = nil
            inFlight = true
            return .send(batch)
        }
        guard let first = waiting.first else { return .idle }
        let due = first.at + options.flushMs
        guard flushAll || waiting.count >= options.batchSize || now >= due else { return .wait(until: due) }
        var events: [Event] = []
        events.reserveCapacity(min(waiting.count, options.batchSize))
        var bytes = 0
        while events.count < options.batchSize, let next = waiting.popFirst() {
            events.append(next.event)
            bytes += next.bytes
        }
        waitingBytes -= bytes
        let batch = Batch(sequence: nextSequence, events: events, attempt: 1, oldestEnqueuedAt: first.at, bytes: bytes)
        nextSequence += 1
        current = batch
        inFlight = true
        return .send(batch)
    }

    /// Reports how the batch in flight went; `random` in `[0, 1)` jitters the backoff.
    public mutating func finished(success: Bool, now: Int64, random: Double) -> Outcome? {
        guard inFlight, let batch = current else { return nil }
        inFlight = false
        if success {
            current = nil
            return .delivered(events: batch.events.count, latencyMs: max(0, now - batch.oldestEnqueuedAt))
        }
        guard options.retry.mayRetry(afterAttempt: batch.attempt) else {
            current = nil
            return .gaveUp(events: batch.events.count, attempts: batch.attempt)
        }
        let at = now + options.retry.delayMs(afterAttempt: batch.attempt, random: random)
        retryAt = at
        return .retry(at: at, attempt: batch.attempt)
    }
}
