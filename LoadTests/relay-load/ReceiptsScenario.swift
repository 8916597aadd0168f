import ArgumentParser
import Foundation
import NIOCore

/// Durable receipts through the relay: each client keeps a window of receipts in flight and
/// sends the next as soon as one is acked (acks come only after commit).
struct ReceiptsScenario: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "receipts", abstract: "Durable receipts per second and ack latency.")
    @OptionGroup var common: CommonOptions
    @Option(help: "Client sockets.") var clients = 50
    @Option(help: "Receipts in flight per client.") var window = 20
    @Option(help: "Measured seconds.") var duration = 5.0

    func run() async throws {
        let run = LoadRun(options: common)
        // Each client alone in its room; authors are not connected, so this measures the store.
        let conns = try await run.openMany(clients, deadline: Date().addingTimeInterval(60), room: { "bench-rc\($0)" })
        let runID = UInt64.random(in: 0..<UInt64.max)
        let stopAt = monotonicNanos() + UInt64(duration * 1e9)
        let window = self.window
        for (i, c) in conns.enumerated() {
            try await c.channel.eventLoop.submit {
                let conn = c.connection
                var n = 0
                conn.onAck = { [weak conn] in
                    guard let conn, monotonicNanos() < stopAt else { return }
                    n += 1
                    conn.emit(n % 2 == 0 ? "message:delivered" : "message:read", "{\"room\":\"\(conn.room!)\",\"messageId\":\"\(runID)-\(i)-\(n)\",\"authorId\":\"author-\(i)\"}", ack: .receipt, flushNow: false)
                }
                for _ in 0..<window {
                    n += 1
                    conn.emit("message:delivered", "{\"room\":\"\(conn.room!)\",\"messageId\":\"\(runID)-\(i)-\(n)\",\"authorId\":\"author-\(i)\"}", ack: .receipt)
                }
            }.get()
        }
        try await Task.sleep(nanoseconds: UInt64(duration * 1e9))
        try await Task.sleep(nanoseconds: 500_000_000)
        let stats = try await run.board.collect()
        // A receipt never answered (its socket closed by a limit, or lost) is an error: a run
        // whose sockets were closed must not pass for a slow store.
        var unanswered = 0
        for c in conns {
            unanswered += try await c.channel.eventLoop.submit { c.connection.awaitedAcks(of: .receipt) }.get()
        }
        let closes = stats.closes.values.reduce(0, +)
        var report = Report("receipts")
        report.add("clients", conns.count)
        report.add("window", window)
        report.add("receipts_sent", stats.sent)
        report.add("receipts_acked", stats.acks)
        report.add("durable_receipts_per_second", Double(stats.acks) / duration)
        report.addLatency("ack", stats.ackLatency)
        for (code, n) in stats.ackErrors.sorted(by: { $0.key < $1.key }) { report.add("ack_error[\(code)]", n) }
        report.add("receipts_unanswered", unanswered)
        for (code, n) in stats.closes.sorted(by: { $0.key < $1.key }) { report.add("closed_by_server[\(code)]", n) }
        await run.closeAll(conns)
        await run.shutdown()
        // A socket the relay closed (a limit the run crossed) makes the rate meaningless: failed.
        let errors = closes > 0 ? max(1, stats.sent) : stats.ackErrors.values.reduce(0, +) + run.connectFailures + unanswered
        try finish(report, errors: errors, operations: max(1, stats.sent), options: common)
    }
}
