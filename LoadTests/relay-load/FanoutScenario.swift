import ArgumentParser
import Foundation

/// Shape of a fan-out run, shared by `fanout` and `slow-consumer`.
struct FanoutOptions: ParsableArguments {
    @Option(help: "Rooms.") var rooms = 10
    @Option(help: "Members per room.") var members = 50
    @Option(help: "Senders (spread over the rooms).") var senders = 10
    @Option(help: "Messages per second, all senders together.") var rate = 1000.0
    @Option(help: "Measured seconds.") var duration = 10.0
    @Option(help: "Unmeasured seconds before.") var warmup = 1.0
    @Option(help: "Event name (Socket.IO mode).") var event = "bench:msg"
    @Option(name: .customLong("devices-per-user"), help: "Sockets per user (Socket.IO mode). A room announces only a user's first device, so K devices per user cut the setup's presence traffic about K-fold; fan-out itself goes to every socket either way.")
    var devicesPerUser = 1
}

/// The result of one fan-out run.
struct FanoutResult {
    var report: Report
    var p99Micros: UInt64
    var errors: Int
    var operations: Int
}

enum Fanout {
    /// Runs R rooms × M members with S senders at a total rate; `stalled` members per room stop
    /// reading after they join.
    static func run(_ common: CommonOptions, _ f: FanoutOptions, stalledPerRoom: Int = 0, name: String = "fanout") async throws -> FanoutResult {
        let run = LoadRun(options: common)
        let total = f.rooms * f.members
        let room = { (i: Int) in "bench-r\(i % f.rooms)" }
        let devices = max(1, f.devicesPerUser)
        let conns = try await run.openMany(total, deadline: Date().addingTimeInterval(common.setupTimeout), room: room, user: { "user-\($0 / devices)" })
        // Senders: the first `senders` sockets, which fall in rooms 0, 1, … round-robin.
        let senders = Array(conns.prefix(min(f.senders, conns.count)))
        // Stalled: the last `stalledPerRoom` members of each room, never senders.
        var stalled: [OpenedConnection] = []
        if stalledPerRoom > 0 {
            for (i, c) in conns.enumerated().reversed() where i >= f.senders {
                let r = i % f.rooms
                if stalled.filter({ $0.connection.room == "bench-r\(r)" }).count < stalledPerRoom { stalled.append(c) }
            }
            for c in stalled {
                try await c.channel.eventLoop.submit { c.connection.stall() }.get()
            }
        }
        // Nothing of the setup may still be in flight when measuring starts.
        let settle = try await run.settle()
        let rssStart = common.relayPID.flatMap(ProcessStats.rss)
        let event = f.event
        let wire = common.wire
        if f.warmup > 0 {
            try await run.drive(senders: senders, ratePerSecond: f.rate, seconds: f.warmup) { c in c.sendBench(event: event) }
            try await Task.sleep(nanoseconds: 300_000_000)
            try await run.board.reset()
        }
        common.mark("measuring")
        let cpuStart = common.relayPID.flatMap(ProcessStats.cpuTimes)
        let ownStart = ProcessStats.cpuMicros(pid: getpid())
        let start = Date()
        try await run.drive(senders: senders, ratePerSecond: f.rate, seconds: f.duration) { c in c.sendBench(event: event) }
        // Let in-flight deliveries land (bounded).
        try await Task.sleep(nanoseconds: 500_000_000)
        let elapsed = Date().timeIntervalSince(start) - 0.5
        let cpuEnd = common.relayPID.flatMap(ProcessStats.cpuTimes)
        let ownEnd = ProcessStats.cpuMicros(pid: getpid())
        common.mark("done")
        let rssEnd = common.relayPID.flatMap(ProcessStats.rss)
        let stats = try await run.board.collect()

        let activeReaders = f.members - 1 - stalledPerRoom
        let expected = stats.sent * max(0, activeReaders)
        var report = Report(name)
        report.add("protocol", wire.rawValue)
        report.add("nodes", run.connectors.count)
        report.add("sockets", conns.count)
        report.add("rooms", f.rooms)
        report.add("members_per_room", f.members)
        report.add("senders", senders.count)
        if stalledPerRoom > 0 { report.add("stalled_per_room", stalledPerRoom) }
        report.add("target_rate", f.rate)
        report.add("settle_seconds", settle.seconds, "s")
        if !settle.settled { report.add("error[not_settled]", 1) }
        report.add("sent", stats.sent)
        report.add("sent_per_second", Double(stats.sent) / elapsed)
        report.add("deliveries", stats.deliveries)
        report.add("deliveries_per_second", Double(stats.deliveries) / elapsed)
        report.add("expected_deliveries_min", expected)
        if stalledPerRoom > 0 { report.add("stalled_deliveries", stats.stalledDeliveries) }
        report.addLatency("latency", stats.deliveryLatency)
        if let a = cpuStart, let b = cpuEnd, stats.deliveries > 0 {
            let user = b.user - a.user, system = b.system - a.system
            report.add("relay_cpu_seconds", Double(user + system) / 1e6, "s")
            report.add("relay_cpu_us_per_delivery", Double(user + system) / Double(stats.deliveries), "µs")
            report.add("relay_user_us_per_delivery", Double(user) / Double(stats.deliveries), "µs")
            report.add("relay_sys_us_per_delivery", Double(system) / Double(stats.deliveries), "µs")
        }
        // The generator's own CPU over the same window, per delivery: the client side of the same
        // traffic on the same machine, a yardstick for how fast the machine is right now.
        if let a = ownStart, let b = ownEnd, stats.deliveries > 0 {
            report.add("generator_cpu_us_per_delivery", Double(b - a) / Double(stats.deliveries), "µs")
        }
        if let a = rssStart, let b = rssEnd {
            report.add("relay_rss_mb", Double(b) / 1_048_576, "MiB")
            report.add("relay_rss_growth_mb", Double(b - a) / 1_048_576, "MiB")
        }
        for (code, n) in stats.closes.sorted(by: { $0.key < $1.key }) { report.add("closed_by_server[\(code)]", n) }
        for (e, n) in stats.errors.sorted(by: { $0.key < $1.key }) { report.add("error[\(e)]", n) }
        report.add("connect_failures", run.connectFailures)
        for (e, n) in run.connectErrors.sorted(by: { $0.key < $1.key }) { report.add("connect_error[\(e)]", n) }
        let p99 = stats.deliveryLatency.totalCount > 0 ? stats.deliveryLatency.valueAtPercentile(99) : 0
        let missing = max(0, expected - stats.deliveries)
        await run.closeAll(conns)
        await run.shutdown()
        let errors = run.connectFailures + stats.errors.values.reduce(0, +) + missing + (settle.settled ? 0 : 1)
        return FanoutResult(report: report, p99Micros: p99, errors: errors, operations: max(1, expected + total))
    }
}

/// R rooms × M members, S senders at a target rate: deliveries/s and delivery latency.
struct FanoutScenario: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "fanout", abstract: "Fan-out throughput and delivery latency.")
    @OptionGroup var common: CommonOptions
    @OptionGroup var fanout: FanoutOptions

    func run() async throws {
        let result = try await Fanout.run(common, fanout)
        try finish(result.report, errors: result.errors, operations: result.operations, options: common)
    }
}

/// `fanout` with k stalled readers per room, against the same run without them.
struct SlowConsumerScenario: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "slow-consumer", abstract: "Others' p99 with and without stalled readers.")
    @OptionGroup var common: CommonOptions
    @OptionGroup var fanout: FanoutOptions
    @Option(help: "Stalled members per room.") var stalled = 1

    func run() async throws {
        let baseline = try await Fanout.run(common, fanout, name: "baseline")
        let slow = try await Fanout.run(common, fanout, stalledPerRoom: stalled, name: "slow-consumer")
        var report = Report("slow-consumer")
        for (k, v) in baseline.report.rows { report.rows.append(("baseline." + k, v)) }
        for (k, v) in slow.report.rows { report.rows.append(("stalled." + k, v)) }
        let change = baseline.p99Micros > 0 ? (Double(slow.p99Micros) - Double(baseline.p99Micros)) / Double(baseline.p99Micros) * 100 : 0
        report.add("others_p99_change_percent", change, "%")
        try finish(report, errors: baseline.errors + slow.errors, operations: baseline.operations + slow.operations, options: common)
    }
}
