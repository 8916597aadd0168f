import Logging
import NIOConcurrencyHelpers
import NIOCore
import RelayCore

/// Typing and live-location timers, the event-loop lag monitor.
extension Hub {
    // MARK: Typing

    public func typing(_ isTyping: Bool, room: String, user: String, connection: ConnectionID) {
        let now = clock.monotonicMs()
        let deadline = roomShards.shard(for: room).withLockedValue { s in
            isTyping ? s.typing.start(room: room, user: user, connection: connection, now: now) : s.typing.stop(room: room, user: user, now: now)
        }
        if let deadline { typingTimer.schedule(at: deadline) }
    }

    /// Timer callback: flushes due typing windows to their rooms; returns the next deadline.
    /// Visits every room shard, one lock at a time (a few µs every window, off the event path);
    /// the changes go out in room order, as from one debouncer.
    func flushTyping() -> Int64? {
        let now = clock.monotonicMs()
        var changes: [TypingDebouncer.Change] = []
        var next: Int64?
        for box in roomShards.boxes {
            let (due, deadline) = box.withLockedValue { s in (s.typing.flush(now: now), s.typing.nextDeadline) }
            changes += due
            if let deadline { next = min(next ?? deadline, deadline) }
        }
        changes.sort { ($0.room, $0.user) < ($1.room, $1.user) }
        let ts = clock.wallMs()
        for change in changes {
            let name = change.isTyping ? "typing:start" : "typing:stop"
            let payload = JSONValue.object([("room", .string(change.room)), ("from", .string(change.user)), ("ts", .int(ts))])
            let key = Self.coalesceKey(name, room: change.room, user: change.user)
            publish(room: change.room, name: name, payload: payload, excludeUser: change.user, coalesceKey: key)
        }
        return next
    }

    // MARK: Live location

    public func startLiveShare(room: String, user: String, connection: ConnectionID, durationSec: Int64) throws(RelayError) {
        let now = clock.monotonicMs()
        let expires = try locations.withLock { s throws(RelayError) in
            try s.start(room: room, user: user, connection: connection, durationSec: durationSec, now: now)
        }
        locationTimer.schedule(at: expires)
    }

    public func checkLiveShare(room: String, user: String) throws(RelayError) {
        let now = clock.monotonicMs()
        try locations.withLock { s throws(RelayError) in try s.checkUpdate(room: room, user: user, now: now) }
    }

    public func stopLiveShare(room: String, user: String) -> Bool {
        locations.withLockedValue { $0.stop(room: room, user: user) }
    }

    func expireLocations() -> Int64? {
        let now = clock.monotonicMs()
        let (expired, next) = locations.withLockedValue { s in (s.expire(now: now), s.nextDeadline) }
        let ts = clock.wallMs()
        for key in expired {
            let payload = JSONValue.object([("room", .string(key.room)), ("from", .string(key.user)), ("ts", .int(ts)), ("reason", "expired")])
            publish(room: key.room, name: "location:stop", payload: payload)
        }
        return next
    }

    public func shutdownTimers() {
        typingTimer.cancel()
        locationTimer.cancel()
        coalesceTimer.cancel()
        for task in lagTasks.withLockedValue({ $0 }) { task.cancel() }
    }


    /// Measures, on every loop, how late a 500 ms timer fires: a busy or blocked loop shows here.
    public func startLagMonitor() {
        let interval: Int64 = 500_000_000
        var tasks: [RepeatedTask] = []
        for shard in shards {
            let last = NIOLockedValueBox<UInt64>(NIODeadline.now().uptimeNanoseconds)
            let metrics = self.metrics
            tasks.append(shard.eventLoop.scheduleRepeatedTask(initialDelay: .nanoseconds(interval), delay: .nanoseconds(interval)) { _ in
                let now = NIODeadline.now().uptimeNanoseconds
                let previous = last.withLockedValue { old in defer { old = now }; return old }
                metrics.eventLoopLag.recordNanoseconds(max(0, Int64(now &- previous) - interval))
            })
        }
        lagTasks.withLockedValue { $0 += tasks }
    }
}
