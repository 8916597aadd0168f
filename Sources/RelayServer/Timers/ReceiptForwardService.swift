import NIOCore
import RelayBackends
import RelayCore

/// Receipt forwards coalesced per room (`receipt-window-ms` > 0): committed receipts wait in
/// their room's window (`ReceiptForwardWindows`, striped by room name like typing) and go out
/// together, one batch event per room and kind for every reader in the window, to the kind's
/// audience. One timer for every stripe.
final class ReceiptForwardService: Sendable {
    /// The most receipts one coalesced event carries (a client batch's limit).
    static let maxItems = 100

    private let stripes: LockStripes<ReceiptForwardWindows>
    private let timer: DeadlineScheduler
    private let clock: RelayClock
    private let publisher: Publisher
    private let audiences: ReceiptAudiences

    init(windowMs: Int64, audiences: ReceiptAudiences, stripes: Int, timerLoop: any EventLoop, clock: RelayClock, publisher: Publisher) {
        self.stripes = LockStripes(count: stripes) { ReceiptForwardWindows(windowMs: windowMs, maxItems: Self.maxItems) }
        self.timer = DeadlineScheduler(eventLoop: timerLoop, now: clock.monotonicMs)
        self.clock = clock
        self.publisher = publisher
        self.audiences = audiences
        timer.setAction { [weak self] in self?.flushDue() }
    }

    /// Committed receipts of `room` (one kind), to forward with the room's window.
    func add(_ receipts: [Receipt], room: String, kind: ReceiptKind) {
        let now = clock.monotonicMs()
        let (full, deadline) = stripes.stripe(for: room).withLockedValue { w in
            (w.add(receipts, room: room, kind: kind, now: now), w.nextDeadline)
        }
        publish(full)
        if let deadline { timer.schedule(at: deadline) }
    }

    /// Forwards every window due; returns the next deadline (the timer's action).
    @discardableResult
    func flushDue(now: Int64? = nil) -> Int64? {
        let now = now ?? clock.monotonicMs()
        var due: [ReceiptForwardWindows.Flush] = []
        var next: Int64?
        for box in stripes.boxes {
            let (flushes, deadline) = box.withLockedValue { w in (w.due(now: now), w.nextDeadline) }
            due += flushes
            if let deadline { next = min(next ?? deadline, deadline) }
        }
        publish(due)
        return next
    }

    /// Forwards every window now (shutdown: the receipts are committed and acked already).
    func flushAll() {
        timer.cancel()
        for box in stripes.boxes { publish(box.withLockedValue { $0.all() }) }
    }

    private func publish(_ flushes: [ReceiptForwardWindows.Flush]) {
        for f in flushes {
            // One reader: its `from`, as an uncoalesced batch; several: none (each item has its
            // `userId`). No socket is excluded: a sender may get its own receipt back in a batch.
            let readers = Set(f.receipts.map(\.userID))
            publisher.publishReceipts(
                f.receipts, room: f.room, kind: f.kind, from: readers.count == 1 ? readers.first : nil, audience: audiences[f.kind],
                excludeConnection: nil)
        }
    }
}
