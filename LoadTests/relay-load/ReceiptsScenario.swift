import ArgumentParser
import Foundation
import NIOCore

/// Durable receipts through the relay: each client keeps a window of receipts in flight and
/// sends the next as soon as one is acked (acks come only after commit).
struct ReceiptsScenario: AsyncParsableCommand {
    /// How the receipts' message ids are made. They decide how many places of the store's
    /// `(message_id, user_id, kind)` index each commit writes to.
    enum MessageIDs: String, ExpressibleByArgument, CaseIterable {
        /// `RUN-CLIENT-N`: each client's messages sort apart from the others', so a commit
        /// touches one place of the index per client.
        case perClient = "per-client"
        /// Wall-clock milliseconds first (fixed-width hex), then client and count, like the
        /// MongoDB ObjectIds, Snowflakes, ULIDs or UUIDv7s chat backends give their messages:
        /// new ids sort after older ones, so a commit's receipts land together.
        case timeOrdered = "time-ordered"
    }

    static let configuration = CommandConfiguration(commandName: "receipts", abstract: "Durable receipts per second and ack latency.")
    @OptionGroup var common: CommonOptions
    @Option(help: "Client sockets.") var clients = 50
    @Option(help: "Receipts in flight per client.") var window = 20
    @Option(help: "Measured seconds.") var duration = 5.0
    @Option(help: "Message ids: per-client (RUN-CLIENT-N) or time-ordered (like ObjectIds).") var messageIds = MessageIDs.perClient

    func run() async throws {
        let run = LoadRun(options: common)
        // Each client alone in its room; authors are not connected, so this measures the store.
        let conns = try await run.openMany(clients, deadline: Date().addingTimeInterval(60), room: { "bench-rc\($0)" })
        let runID = UInt64.random(in: 0..<UInt64.max)
        let stopAt = monotonicNanos() + UInt64(duration * 1e9)
        let window = self.window
        let idScheme = messageIds
        for (i, c) in conns.enumerated() {
            try await c.channel.eventLoop.submit {
                let conn = c.connection
                var n = 0
                conn.onAck = { [weak conn] in
                    guard let conn, monotonicNanos() < stopAt else { return }
                    n += 1
                    let id = Self.messageID(idScheme, run: runID, client: i, n: n)
                    conn.emit(n % 2 == 0 ? "message:delivered" : "message:read", "{\"room\":\"\(conn.room!)\",\"messageId\":\"\(id)\",\"authorId\":\"author-\(i)\"}", ack: .receipt, flushNow: false)
                }
                for _ in 0..<window {
                    n += 1
                    let id = Self.messageID(idScheme, run: runID, client: i, n: n)
                    conn.emit("message:delivered", "{\"room\":\"\(conn.room!)\",\"messageId\":\"\(id)\",\"authorId\":\"author-\(i)\"}", ack: .receipt)
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
        report.add("message_ids", idScheme.rawValue)
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

    /// The `n`th message id of `client`, unique within the run and across runs.
    static func messageID(_ scheme: MessageIDs, run: UInt64, client: Int, n: Int) -> String {
        switch scheme {
        case .perClient:
            return "\(run)-\(client)-\(n)"
        case .timeOrdered:
            let ms = UInt64(max(0, Date().timeIntervalSince1970 * 1000))
            return hex(ms, width: 12) + hex(UInt64(truncatingIfNeeded: client), width: 6) + hex(UInt64(truncatingIfNeeded: n), width: 8) + "-" + String(run, radix: 16)
        }
    }

    private static func hex(_ value: UInt64, width: Int) -> String {
        let digits = String(value, radix: 16)
        return digits.count >= width ? digits : String(repeating: "0", count: width - digits.count) + digits
    }
}
