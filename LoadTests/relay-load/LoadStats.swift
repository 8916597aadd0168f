import Histogram
import NIOCore

/// Counters of one event loop's connections. Loop-confined: touched only on its loop, merged
/// at the end, so measuring costs no lock.
final class LoopStats {
    var deliveries = 0
    /// Deliveries read by stalled connections (slow-consumer), kept out of `deliveries` and
    /// `deliveryLatency`: those measure the readers that read, not the stall's own length.
    var stalledDeliveries = 0
    var deliveryLatency = Histogram<UInt64>(highestTrackableValue: 60_000_000)  // µs
    var ackLatency = Histogram<UInt64>(highestTrackableValue: 60_000_000)  // µs
    var acks = 0
    var ackErrors: [String: Int] = [:]
    var errors: [String: Int] = [:]
    var closes: [UInt16: Int] = [:]
    var sent = 0
    /// Arrival times (ns) of typing events per room, as seen by the room's observer.
    var typingArrivals: [String: [UInt64]] = [:]
    var typingEvents = 0
    /// `presence:*` events (not deliveries of the scenario's own events).
    var presenceEvents = 0
    /// Every event received (Socket.IO `42` packets, raw text frames), whatever it was; never
    /// reset (`LoadRun.settle` watches it). Pings are not counted: with thousands of sockets one
    /// arrives every few milliseconds.
    var events = 0

    init() {
        deliveryLatency.autoResize = true
        ackLatency.autoResize = true
    }

    func merge(_ other: LoopStats) {
        deliveries += other.deliveries
        stalledDeliveries += other.stalledDeliveries
        deliveryLatency.add(other.deliveryLatency)
        ackLatency.add(other.ackLatency)
        acks += other.acks
        sent += other.sent
        typingEvents += other.typingEvents
        presenceEvents += other.presenceEvents
        events += other.events
        for (k, v) in other.ackErrors { ackErrors[k, default: 0] += v }
        for (k, v) in other.errors { errors[k, default: 0] += v }
        for (k, v) in other.closes { closes[k, default: 0] += v }
        for (k, v) in other.typingArrivals { typingArrivals[k, default: []] += v }
    }

    func reset() {
        deliveries = 0
        stalledDeliveries = 0
        deliveryLatency.reset()
        ackLatency.reset()
        acks = 0
        sent = 0
        typingEvents = 0
        presenceEvents = 0
        ackErrors = [:]
        typingArrivals = [:]
    }
}

/// Monotonic nanoseconds, the same clock in every process on the machine (CLOCK_MONOTONIC).
@inline(__always) func monotonicNanos() -> UInt64 { NIODeadline.now().uptimeNanoseconds }

/// One `LoopStats` per event loop of the generator.
final class StatsBoard: @unchecked Sendable {
    private var byLoop: [ObjectIdentifier: LoopStats] = [:]
    let loops: [any EventLoop]

    init(group: any EventLoopGroup) {
        loops = Array(group.makeIterator())
        for loop in loops { byLoop[ObjectIdentifier(loop)] = LoopStats() }
    }

    /// The stats of `loop`; call on that loop only.
    func stats(for loop: any EventLoop) -> LoopStats { byLoop[ObjectIdentifier(loop)]! }

    /// Merges every loop's stats (each read on its own loop).
    func collect() async throws -> LoopStats {
        let total = LoopStats()
        for loop in loops {
            // Copied on the loop that owns it, merged here.
            let snapshot = try await loop.submit { () -> UnsafeSendable<LoopStats> in
                let copy = LoopStats()
                copy.merge(self.stats(for: loop))
                return UnsafeSendable(copy)
            }.get()
            total.merge(snapshot.value)
        }
        return total
    }

    /// Events received so far by every loop's connections.
    func events() async throws -> Int {
        var total = 0
        for loop in loops { total += try await loop.submit { self.stats(for: loop).events }.get() }
        return total
    }

    func reset() async throws {
        for loop in loops { try await loop.submit { self.stats(for: loop).reset() }.get() }
    }
}

struct UnsafeSendable<T>: @unchecked Sendable {
    let value: T
    init(_ value: T) { self.value = value }
}
