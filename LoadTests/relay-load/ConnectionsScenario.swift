import ArgumentParser
import Foundation

/// Opens N authenticated sockets, holds them, reports connect rate, failures and the server's
/// RSS per socket.
struct ConnectionsScenario: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "connections", abstract: "Open and hold N authenticated sockets.")
    @OptionGroup var common: CommonOptions
    @Option(help: "Sockets to open (this process can hold about 19,900 under a 20,000-file limit).") var count = 1000
    @Option(help: "Seconds to hold them once open.") var hold = 5.0
    @Option(help: "Give up opening after this many seconds.") var timeout = 120.0
    @Option(help: "Handshakes in flight.") var concurrency = 256

    func run() async throws {
        let run = LoadRun(options: common)
        let rssBefore = common.relayPID.flatMap(ProcessStats.rss)
        let start = Date()
        let conns = try await run.openMany(count, concurrency: concurrency, deadline: start.addingTimeInterval(timeout), room: { _ in nil })
        let elapsed = Date().timeIntervalSince(start)
        let rssOpen = common.relayPID.flatMap(ProcessStats.rss)
        let fds = common.relayPID.flatMap(ProcessStats.openFiles)
        try await Task.sleep(nanoseconds: UInt64(hold * 1e9))
        let stats = try await run.board.collect()
        let still = conns.filter { $0.channel.isActive }.count
        var report = Report("connections")
        report.add("requested", count)
        report.add("connected", conns.count)
        report.add("connect_failures", run.connectFailures)
        for (e, n) in run.connectErrors.sorted(by: { $0.key < $1.key }) { report.add("connect_error[\(e)]", n) }
        report.add("connect_seconds", elapsed, "s")
        report.add("connects_per_second", Double(conns.count) / elapsed)
        report.add("still_open_after_hold", still)
        if let a = rssBefore, let b = rssOpen {
            report.add("relay_rss_before_mb", Double(a) / 1_048_576, "MiB")
            report.add("relay_rss_open_mb", Double(b) / 1_048_576, "MiB")
            report.add("relay_rss_per_socket_kib", conns.isEmpty ? 0 : Double(b - a) / Double(conns.count) / 1024, "KiB")
        }
        if let fds { report.add("relay_open_files", fds) }
        for (code, n) in stats.closes.sorted(by: { $0.key < $1.key }) { report.add("closed_by_server[\(code)]", n) }
        await run.closeAll(conns)
        await run.shutdown()
        try finish(report, errors: run.connectFailures + (conns.count - still), operations: count, options: common)
    }
}
