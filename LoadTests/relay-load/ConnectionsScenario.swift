import ArgumentParser
import Foundation

/// Opens N authenticated sockets, holds them, reports connect rate, failures and the server's
/// RSS per socket. With `--processes K` it runs K generator processes (K copies of itself), for
/// socket counts beyond one process's file limit.
struct ConnectionsScenario: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "connections", abstract: "Open and hold N authenticated sockets.")
    @OptionGroup var common: CommonOptions
    @Option(help: "Sockets to open in total (one process holds about 19,900 under a 20,000-file limit).") var count = 1000
    @Option(help: "Seconds to hold them once open.") var hold = 5.0
    @Option(help: "Give up opening after this many seconds.") var timeout = 120.0
    @Option(help: "Handshakes in flight (per process).") var concurrency = 256
    @Option(help: "Generator processes sharing the sockets.") var processes = 1
    @Option(name: .customLong("worker-offset"), help: .hidden) var workerOffset: Int?

    func run() async throws {
        if processes > 1 && workerOffset == nil { return try await runParent() }
        let run = LoadRun(options: common)
        let rssBefore = common.relayPID.flatMap(ProcessStats.rss)
        let start = Date()
        let conns = try await run.openMany(count, concurrency: concurrency, deadline: start.addingTimeInterval(timeout), offset: workerOffset ?? 0, room: { _ in nil })
        let elapsed = Date().timeIntervalSince(start)
        if workerOffset != nil {
            // Worker: tell the parent, hold, close, exit.
            FileHandle.standardOutput.write(Data("OPEN \(conns.count) \(run.connectFailures) \(elapsed)\n".utf8))
            try await Task.sleep(nanoseconds: UInt64(hold * 1e9))
            await run.closeAll(conns)
            await run.shutdown()
            return
        }
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
        addMemory(&report, before: rssBefore, open: rssOpen, sockets: conns.count, fds: fds)
        for (code, n) in stats.closes.sorted(by: { $0.key < $1.key }) { report.add("closed_by_server[\(code)]", n) }
        await run.closeAll(conns)
        await run.shutdown()
        try finish(report, errors: run.connectFailures + (conns.count - still), operations: count, options: common)
    }

    private func addMemory(_ report: inout Report, before: Int?, open: Int?, sockets: Int, fds: Int?) {
        if let a = before, let b = open {
            report.add("relay_rss_before_mb", Double(a) / 1_048_576, "MiB")
            report.add("relay_rss_open_mb", Double(b) / 1_048_576, "MiB")
            report.add("relay_rss_per_socket_kib", sockets == 0 ? 0 : Double(b - a) / Double(sockets) / 1024, "KiB")
        }
        if let fds { report.add("relay_open_files", fds) }
    }

    /// Runs `processes` copies of this scenario, each with its share of the sockets, and reads
    /// the relay's memory once all of them hold their sockets.
    private func runParent() async throws {
        let rssBefore = common.relayPID.flatMap(ProcessStats.rss)
        let me = URL(fileURLWithPath: CommandLine.arguments[0]).standardizedFileURL
        var base = Array(CommandLine.arguments.dropFirst())
        // Drop our own --processes and --json; each worker gets its share.
        var i = 0
        while i < base.count {
            if base[i] == "--processes" || base[i] == "--count" { base.removeSubrange(i...min(i + 1, base.count - 1)); continue }
            if base[i] == "--json" { base.remove(at: i); continue }
            i += 1
        }
        let share = count / processes
        var workers: [(Process, Pipe)] = []
        let start = Date()
        for w in 0..<processes {
            let n = w == processes - 1 ? count - share * (processes - 1) : share
            let p = Process()
            p.executableURL = me
            p.arguments = base + ["--count", String(n), "--worker-offset", String(w * share)]
            let pipe = Pipe()
            p.standardOutput = pipe
            p.standardError = FileHandle.standardError
            try p.run()
            workers.append((p, pipe))
        }
        // Each worker prints "OPEN connected failures seconds" once its sockets are open.
        var connected = 0, failures = 0
        for (_, pipe) in workers {
            let line = Self.readLine(pipe.fileHandleForReading)
            let parts = line.split(separator: " ")
            guard parts.count == 4, parts[0] == "OPEN" else { throw ValidationError("a worker failed: \(line)") }
            connected += Int(parts[1]) ?? 0
            failures += Int(parts[2]) ?? 0
        }
        let elapsed = Date().timeIntervalSince(start)
        let rssOpen = common.relayPID.flatMap(ProcessStats.rss)
        let fds = common.relayPID.flatMap(ProcessStats.openFiles)
        for (p, _) in workers { p.waitUntilExit() }
        var report = Report("connections")
        report.add("processes", processes)
        report.add("requested", count)
        report.add("connected", connected)
        report.add("connect_failures", failures)
        report.add("connect_seconds", elapsed, "s")
        report.add("connects_per_second", Double(connected) / elapsed)
        addMemory(&report, before: rssBefore, open: rssOpen, sockets: connected, fds: fds)
        try finish(report, errors: failures + (count - connected), operations: count, options: common)
    }

    static func readLine(_ handle: FileHandle) -> String {
        var bytes: [UInt8] = []
        while true {
            let data = handle.readData(ofLength: 1)
            if data.isEmpty || data.first == UInt8(ascii: "\n") { break }
            bytes.append(data.first!)
        }
        return String(decoding: bytes, as: UTF8.self)
    }
}
