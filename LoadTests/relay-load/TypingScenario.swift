import ArgumentParser
import Foundation

/// A typing storm: every member toggles typing; one observer per room checks that flushes
/// arrive at most once per coalescing window.
struct TypingScenario: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "typing", abstract: "Typing storm: check the 100 ms coalescing under load.")
    @OptionGroup var common: CommonOptions
    @Option(help: "Rooms.") var rooms = 20
    @Option(help: "Members per room (one more socket per room observes).") var members = 10
    @Option(help: "typing:start/stop events per second, all members together.") var rate = 2000.0
    @Option(help: "Measured seconds.") var duration = 5.0
    @Option(name: .customLong("window-ms"), help: "The relay's coalescing window.") var windowMs = 100.0

    func run() async throws {
        let run = LoadRun(options: common)
        // Socket i < rooms is the observer of room i; the rest type.
        let total = rooms * (members + 1)
        let conns = try await run.openMany(total, deadline: Date().addingTimeInterval(common.setupTimeout), room: { "bench-t\($0 % rooms)" }, observer: { $0 < rooms })
        let typists = Array(conns.dropFirst(rooms))
        let start = Date()
        try await run.drive(senders: typists, ratePerSecond: rate, seconds: duration) { c in
            // Alternate start and stop per socket.
            let event = c.toggleTyping() ? "typing:start" : "typing:stop"
            c.emit(event, "{\"room\":\"\(c.room ?? "")\"}")
        }
        try await Task.sleep(nanoseconds: UInt64((windowMs / 1000 + 0.3) * 1e9))
        let elapsed = Date().timeIntervalSince(start)
        let stats = try await run.board.collect()

        // A flush is a burst of events arriving within 10 ms of each other at the observer.
        var flushes = 0
        var violations = 0
        var minGapMs = Double.infinity
        for (_, arrivals) in stats.typingArrivals {
            let sorted = arrivals.sorted()
            var bursts: [UInt64] = []
            for t in sorted where bursts.last.map({ t - $0 > 10_000_000 }) ?? true { bursts.append(t) }
            flushes += bursts.count
            for (a, b) in zip(bursts, bursts.dropFirst()) {
                let gap = Double(b - a) / 1e6
                minGapMs = min(minGapMs, gap)
                // 10% slack for scheduling jitter on a loaded box.
                if gap < windowMs * 0.9 { violations += 1 }
            }
        }
        var report = Report("typing")
        report.add("sockets", conns.count)
        report.add("rooms", rooms)
        report.add("typing_events_sent", stats.sent)
        report.add("sent_per_second", Double(stats.sent) / duration)
        report.add("typing_events_received", stats.typingEvents)
        report.add("observer_flushes", flushes)
        report.add("observer_flushes_per_room_per_second", Double(flushes) / Double(max(1, rooms)) / elapsed)
        report.add("min_gap_between_flushes_ms", minGapMs.isFinite ? minGapMs : 0, "ms")
        report.add("coalescing_violations", violations)
        for (code, n) in stats.ackErrors.sorted(by: { $0.key < $1.key }) { report.add("ack_error[\(code)]", n) }
        for (e, n) in stats.errors.sorted(by: { $0.key < $1.key }) { report.add("error[\(e)]", n) }
        await run.closeAll(conns)
        await run.shutdown()
        try finish(report, errors: violations + run.connectFailures + stats.errors.values.reduce(0, +), operations: max(1, stats.sent), options: common)
    }
}

/// Live location: every member shares, then sends updates; deliveries/s and ack latency.
struct LocationScenario: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "location", abstract: "Live-location updates fanned out.")
    @OptionGroup var common: CommonOptions
    @Option(help: "Rooms.") var rooms = 10
    @Option(help: "Members per room.") var members = 10
    @Option(help: "location:update per second, all members together.") var rate = 1000.0
    @Option(help: "Measured seconds.") var duration = 5.0

    func run() async throws {
        let run = LoadRun(options: common)
        let conns = try await run.openMany(rooms * members, deadline: Date().addingTimeInterval(common.setupTimeout), room: { "bench-l\($0 % rooms)" })
        for c in conns {
            try await c.channel.eventLoop.submit {
                c.connection.emit("location:share-live", "{\"room\":\"\(c.connection.room ?? "")\",\"durationSec\":600}", ack: .other)
            }.get()
        }
        try await Task.sleep(nanoseconds: 300_000_000)
        try await run.board.reset()
        let start = Date()
        try await run.drive(senders: conns, ratePerSecond: rate, seconds: duration) { c in
            let lat = Double.random(in: -80...80), lng = Double.random(in: -170...170)
            c.emit("location:update", "{\"room\":\"\(c.room ?? "")\",\"lat\":\(lat),\"lng\":\(lng),\"accuracy\":5}", ack: .other)
        }
        try await Task.sleep(nanoseconds: 500_000_000)
        let elapsed = Date().timeIntervalSince(start) - 0.5
        let stats = try await run.board.collect()
        var report = Report("location")
        report.add("sockets", conns.count)
        report.add("updates_sent", stats.sent)
        report.add("updates_acked", stats.acks)
        report.add("deliveries", stats.deliveries)
        report.add("deliveries_per_second", Double(stats.deliveries) / elapsed)
        report.addLatency("ack", stats.ackLatency)
        for (code, n) in stats.ackErrors.sorted(by: { $0.key < $1.key }) { report.add("ack_error[\(code)]", n) }
        await run.closeAll(conns)
        await run.shutdown()
        try finish(report, errors: stats.ackErrors.values.reduce(0, +) + run.connectFailures + max(0, stats.sent - stats.acks), operations: max(1, stats.sent), options: common)
    }
}

extension LoadConnection {
    /// Flips this socket's typing state; `true` means it should send a start.
    func toggleTyping() -> Bool {
        typingOn.toggle()
        return typingOn
    }
}
