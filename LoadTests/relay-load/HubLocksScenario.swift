import ArgumentParser
import Dispatch
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import RelayCore
import RelayServer

/// The hub's shared-state locks alone, in process: what each client event costs in them (the
/// membership check, the publish's audience read, a typing change), from 1 and from N threads
/// at once, with one lock per kind of state against the sharded default. On a machine with as
/// many cores as threads this is the contention a many-core host would see; no network, no
/// deliveries (each room holds only the sender).
struct HubLocksScenario: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "hub-locks", abstract: "The hub's shared-state locks alone: events/s from 1 and N threads, one lock against 64 shards.")
    @Option(help: "Thread counts to run, comma-separated.") var threads = "1,2"
    @Option(help: "Lock shard counts to compare, comma-separated (1 = one lock per kind of state).") var shards = "1,64"
    @Option(help: "Connections, each alone in its own room.") var connections = 4096
    @Option(help: "Events per thread (each: membership check, publish audience, typing change).") var events = 500_000
    @Option(help: "Upper bound on one measurement, seconds.") var duration = 10.0
    @Option(help: "Measurements of each (shards, threads) pair; the best is reported.") var rounds = 3
    @Flag(help: "Print JSON.") var json = false

    func run() throws {
        guard connections > 0, events > 0, duration > 0, rounds > 0 else { throw ValidationError("counts must be positive") }
        let threadCounts = threads.split(separator: ",").compactMap { Int($0) }.filter { $0 > 0 && $0 <= 64 }
        let shardCounts = shards.split(separator: ",").compactMap { Int($0) }.filter { $0 > 0 && $0 <= 4096 }
        var report = Report("hub-locks")
        report.add("connections", connections)
        report.add("events_per_thread", events)
        for s in shardCounts {
            var single = 0.0
            for t in threadCounts {
                var best = 0.0
                for _ in 0..<rounds { best = max(best, try measure(shards: s, threads: t)) }
                if t == threadCounts.first { single = best / Double(t) }
                report.add("shards_\(s).threads_\(t).events_per_second", best)
                report.add("shards_\(s).threads_\(t).ns_per_event_per_thread", 1e9 / (best / Double(t)))
                report.add("shards_\(s).threads_\(t).speedup_per_thread", single > 0 ? best / Double(t) / single : 0)
            }
        }
        print(report.render(json: json))
    }

    /// Events per second over all threads.
    func measure(shards: Int, threads: Int) throws -> Double {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 2)
        defer { try? group.syncShutdownGracefully() }
        let loops = [group.next(), group.next()]
        let configuration = RelayConfiguration(jwt: .hs256(secret: String(repeating: "k", count: 32)), apiKey: "bench-api-key", adminKey: "bench-admin-key")
        let hub = Hub(eventLoops: loops, configuration: configuration, lockStripes: shards)
        let rooms = (0..<connections).map { "conversation:\($0)" }
        let users = (0..<connections).map { "user-\($0)" }
        for i in 0..<connections {
            let shard = hub.partitions[i % hub.partitions.count]
            let (room, user) = (rooms[i], users[i])
            try shard.eventLoop.submit {
                let sink = DiscardingSink(ConnectionID(UInt64(i + 1)))
                try hub.membership.register(sink, sid: "s\(i)", user: user, on: shard)
                _ = try hub.membership.join(room: room, sink: sink, user: user, on: shard)
            }.wait()
        }
        let events = self.events, count = connections
        let deadline = DispatchTime.now().uptimeNanoseconds + UInt64(duration * 1e9)
        let done = NIOLockedValueBox(0)
        let payload = JSONValue.object([("room", "x")])
        let start = DispatchTime.now().uptimeNanoseconds
        DispatchQueue.concurrentPerform(iterations: threads) { t in
            var n = 0
            // Each thread walks its own part of the connections, as sockets on different loops do.
            var i = (count / max(1, threads)) * t
            while n < events {
                if n & 1023 == 0, DispatchTime.now().uptimeNanoseconds > deadline { break }
                let id = ConnectionID(UInt64(i + 1))
                let room = rooms[i]
                if hub.rooms.isMember(room: room, connection: id) {
                    hub.publisher.publish(room: room, event: EventPolicyTable.backend("location:update"), payload: payload, excludeConnection: id, origin: "s\(i)")
                    hub.typing.change(n & 2 == 0, room: room, user: users[i], connection: id)
                }
                n += 1
                i += 1
                if i == count { i = 0 }
            }
            done.withLockedValue { $0 += n }
        }
        let elapsed = Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9
        hub.stopTimers()
        return Double(done.withLockedValue { $0 }) / elapsed
    }
}

/// A connection end that drops what it is sent (nothing is sent here: each room holds only
/// its sender).
final class DiscardingSink: ConnectionSink {
    let connectionID: ConnectionID
    init(_ id: ConnectionID) { connectionID = id }
    func enqueue(_ message: OutboundMessage) {}
    func flushOutbound() {}
    func close(code: UInt16, reason: String) {}
    var isClosing: Bool { false }
    func mayAccess(room: String) -> Bool { true }
}
