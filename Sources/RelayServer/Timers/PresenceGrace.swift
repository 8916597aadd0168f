import NIOCore
import RelayBackends
import RelayCore
import RelayLocks

/// Presence without flicker (`presence-grace-ms`): a user whose connection dropped stays in its
/// rooms' presence, online and subscribed to its stream, for the grace; coming back within it
/// changes nothing anyone sees. When a departure is due, what the user did not take back ends:
/// the rooms' holds (`presence:leave`, `room:vacated` when they apply) and, with no connection
/// left, the user's departure (`user:offline`, the store told, the stream unsubscribed).
///
/// Only drops are held: a `41`, a kick or a broken rule ends presence at once. Typing and live
/// shares stop at once whatever the reason.
final class PresenceGrace: Sendable {
    /// 0: every drop ends presence at once (no holds).
    let graceMs: Int64
    private let departures = AuditedLock(Departures())
    private let timer: DeadlineScheduler
    private let rooms: RoomDirectory
    private let registry: ConnectionRegistry
    private let announcer: PresenceAnnouncer
    private let clock: RelayClock
    private let homeLoop: any EventLoop

    init(graceMs: Int64, rooms: RoomDirectory, registry: ConnectionRegistry, announcer: PresenceAnnouncer, clock: RelayClock, timerLoop: any EventLoop) {
        self.graceMs = max(0, graceMs)
        self.rooms = rooms
        self.registry = registry
        self.announcer = announcer
        self.clock = clock
        self.homeLoop = timerLoop
        self.timer = DeadlineScheduler(eventLoop: timerLoop, now: clock.monotonicMs)
        timer.setAction { [weak self] in self?.endDue() }
    }

    /// Until when a connection dropping now is held; `nil` when there is no grace.
    func holdUntil(now: Int64) -> Int64? {
        graceMs > 0 ? now + graceMs : nil
    }

    /// `user`'s connection dropped, leaving holds in `rooms` until `until`.
    func departed(_ user: String, rooms: [String], until: Int64) {
        let next = departures.withLockedValue { d in
            d.append(Departures.Departure(user: user, rooms: rooms, until: until))
            return d.nextDeadline
        }
        if let next { timer.schedule(at: next) }
    }

    /// Ends the departures due at `now` (the timer; tests call it with their own clock).
    @discardableResult
    func endDue(now: Int64? = nil) -> Int64? {
        let now = now ?? clock.monotonicMs()
        let (due, next) = departures.withLockedValue { d in (d.due(now: now), d.nextDeadline) }
        end(due, now: now)
        return next
    }

    /// Ends every departure now (shutdown, once the sockets are gone).
    func endAll() {
        timer.cancel()
        let all = departures.withLockedValue { $0.all() }
        end(all, now: .max)
    }

    func cancel() { timer.cancel() }

    private func end(_ due: [Departures.Departure], now: Int64) {
        for departure in due {
            for room in departure.rooms {
                if let left = rooms.releaseHolds(room: room, user: departure.user, now: now) {
                    announcer.left(left, exclude: nil, on: homeLoop)
                }
            }
            registry.endDeparture(departure.user, now: now)
        }
    }
}
