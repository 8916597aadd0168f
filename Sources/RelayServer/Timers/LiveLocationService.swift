import NIOConcurrencyHelpers
import NIOCore
import RelayBackends
import RelayCore
import RelayLocks

/// Live location shares (`location:share-live` … `location:stop`): their durations, the
/// per-connection limit (it spans rooms, hence one lock), and a timer that ends expired shares.
/// A share that ends without its sender's `location:stop` (expired, left, disconnected) is
/// announced to its room with the reason.
final class LiveLocationService: Sendable {
    private let shares: AuditedLock<LiveLocationShares>
    private let timer: DeadlineScheduler
    private let clock: RelayClock
    private let publisher: Publisher

    init(maxSharesPerConnection: Int, timerLoop: any EventLoop, clock: RelayClock, publisher: Publisher) {
        self.shares = AuditedLock(LiveLocationShares(maxSharesPerConnection: maxSharesPerConnection))
        self.timer = DeadlineScheduler(eventLoop: timerLoop, now: clock.monotonicMs)
        self.clock = clock
        self.publisher = publisher
        timer.setAction { [weak self] in self?.expire() }
    }

    func start(room: String, user: String, connection: ConnectionID, durationSec: Int64) throws(RelayError) {
        let now = clock.monotonicMs()
        let expires = try shares.withLock { s throws(RelayError) in
            try s.start(room: room, user: user, connection: connection, durationSec: durationSec, now: now)
        }
        timer.schedule(at: expires)
    }

    func check(room: String, user: String) throws(RelayError) {
        let now = clock.monotonicMs()
        try shares.withLock { s throws(RelayError) in try s.checkUpdate(room: room, user: user, now: now) }
    }

    /// The sender's own `location:stop`; `false` when it had no share there.
    func stop(room: String, user: String) -> Bool {
        shares.withLockedValue { $0.stop(room: room, user: user) }
    }

    /// The connection left `room`: its share there ends.
    func connectionLeft(_ connection: ConnectionID, room: String) {
        announce(shares.withLockedValue { $0.connectionLeft(connection, room: room) }, reason: "left", exclude: connection)
    }

    /// The connection closed: all its shares end.
    func connectionClosed(_ connection: ConnectionID) {
        announce(shares.withLockedValue { $0.connectionClosed(connection) }, reason: "disconnected", exclude: connection)
    }

    /// Timer callback: ends expired shares; returns the next deadline.
    private func expire() -> Int64? {
        let now = clock.monotonicMs()
        let (expired, next) = shares.withLockedValue { s in (s.expire(now: now), s.nextDeadline) }
        announce(expired, reason: "expired", exclude: nil)
        return next
    }

    private func announce(_ ended: [LiveLocationShares.Key], reason: String, exclude: ConnectionID?) {
        guard !ended.isEmpty else { return }
        let ts = clock.wallMs()
        for key in ended {
            let payload = JSONValue.object([("room", .string(key.room)), ("from", .string(key.user)), ("ts", .int(ts)), ("reason", .string(reason))])
            publisher.publish(room: key.room, event: ServerEvent.locationStop.policy, payload: payload, excludeConnection: exclude)
        }
    }

    func cancel() { timer.cancel() }
}
