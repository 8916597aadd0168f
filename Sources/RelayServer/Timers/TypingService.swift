import NIOConcurrencyHelpers
import NIOCore
import RelayBackends
import RelayCore

/// Typing indicators: per room, 100 ms windows that send only net changes, with a 5 s expiry
/// (`TypingDebouncer`), striped by room name over their own locks, and one timer for every
/// stripe. A change that does not move the timer earlier returns after an atomic read.
public final class TypingService: Sendable {
    private let stripes: LockStripes<TypingDebouncer>
    private let timer: DeadlineScheduler
    private let clock: RelayClock
    private let publisher: Publisher

    init(windowMs: Int64, expiryMs: Int64, stripes: Int, timerLoop: any EventLoop, clock: RelayClock, publisher: Publisher) {
        self.stripes = LockStripes(count: stripes) { TypingDebouncer(windowMs: windowMs, expiryMs: expiryMs) }
        self.timer = DeadlineScheduler(eventLoop: timerLoop, now: clock.monotonicMs)
        self.clock = clock
        self.publisher = publisher
        timer.setAction { [weak self] in self?.flush() }
    }

    /// A `typing:start` or `typing:stop` of `user` in `room`.
    public func change(_ isTyping: Bool, room: String, user: String, connection: ConnectionID) {
        let now = clock.monotonicMs()
        let deadline = stripes.stripe(for: room).withLockedValue { t in
            isTyping ? t.start(room: room, user: user, connection: connection, now: now) : t.stop(room: room, user: user, now: now)
        }
        if let deadline { timer.schedule(at: deadline) }
    }

    /// A connection left `room` (or closed): its typing there stops.
    func connectionLeft(_ connection: ConnectionID, room: String) {
        let now = clock.monotonicMs()
        let deadline = stripes.stripe(for: room).withLockedValue { t in
            t.connectionLeft(connection, room: room, now: now)
            return t.nextDeadline
        }
        if let deadline { timer.schedule(at: deadline) }
    }

    /// Timer callback: flushes due windows to their rooms; returns the next deadline. Visits
    /// every stripe, one lock at a time (a few µs every window, off the event path); the changes
    /// go out in room order, as from one debouncer.
    private func flush() -> Int64? {
        let now = clock.monotonicMs()
        var changes: [TypingDebouncer.Change] = []
        var next: Int64?
        for box in stripes.boxes {
            let (due, deadline) = box.withLockedValue { t in (t.flush(now: now), t.nextDeadline) }
            changes += due
            if let deadline { next = min(next ?? deadline, deadline) }
        }
        changes.sort { ($0.room, $0.user) < ($1.room, $1.user) }
        let ts = clock.wallMs()
        for change in changes {
            let event = ServerEvent.typing(change.isTyping).policy
            let payload = JSONValue.object([("room", .string(change.room)), ("from", .string(change.user)), ("ts", .int(ts))])
            publisher.publish(
                room: change.room, event: event, payload: payload, excludeUser: change.user,
                coalescingKey: event.coalescingKey(room: change.room, user: change.user))
        }
        return next
    }

    /// Users typing in `room` now (tests, admin).
    func typingUsers(room: String) -> [String] {
        stripes.stripe(for: room).withLockedValue { $0.typingUsers(room: room) }
    }

    func cancel() { timer.cancel() }
}
