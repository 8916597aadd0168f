import ArgumentParser
import Foundation
import Histogram
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import RelayCore
import RelayStore

/// The receipt store alone, in process: group commit against one transaction per receipt,
/// same producers, same file system.
struct StoreReceiptsScenario: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "store-receipts", abstract: "Receipt store: group commit vs one transaction per receipt.")
    @Option(help: "Directory for the benchmark databases (deleted afterwards).") var dir = FileManager.default.temporaryDirectory.path
    @Option(help: "Concurrent producers (like sockets).") var producers = 200
    @Option(help: "Receipts in flight per producer.") var window = 4
    @Option(help: "Measured seconds per mode.") var duration = 5.0
    @Option(help: "Largest group-commit batch.") var maxBatch = 1024
    @Flag(help: "Print JSON.") var json = false

    func run() async throws {
        var report = Report("store-receipts")
        report.add("producers", producers)
        report.add("window", window)
        for (label, batch) in [("group_commit", maxBatch), ("one_tx_per_receipt", 1)] {
            let (rate, h) = try await measure(batch: batch)
            report.add("\(label).receipts_per_second", rate)
            report.addLatency("\(label).ack", h)
        }
        print(report.render(json: json))
    }

    func measure(batch: Int) async throws -> (Double, Histogram<UInt64>) {
        let path = (dir as NSString).appendingPathComponent("relay-store-bench-\(UUID().uuidString).sqlite")
        defer { for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: path + suffix) } }
        let options = SQLiteReceiptStore.Options(maxBatch: batch, retentionDays: nil, replicate: false)
        let store = try SQLiteReceiptStore(path: path, options: options)
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 2)
        let histograms = NIOLockedValueBox<Histogram<UInt64>>(Histogram(highestTrackableValue: 60_000_000))
        let count = NIOLockedValueBox(0)
        let stopAt = monotonicNanos() + UInt64(duration * 1e9)
        let done = NIOLockedValueBox(0)
        let finished = group.next().makePromise(of: Void.self)
        let producers = self.producers
        let window = self.window

        for p in 0..<producers {
            let loop = group.next()
            let state = NIOLockedValueBox(0)
            @Sendable func sendNext() {
                let n = state.withLockedValue { $0 += 1; return $0 }
                let sent = monotonicNanos()
                let receipt = NewReceipt(room: "r\(p)", messageID: "m-\(p)-\(n)", authorID: "a\(p % 50)", userID: "u\(p)", kind: .delivered, ts: Int64(n))
                store.record(receipt, on: loop).whenComplete { result in
                    let now = monotonicNanos()
                    if case .success = result {
                        histograms.withLockedValue { _ = $0.record((now - sent) / 1000) }
                        count.withLockedValue { $0 += 1 }
                    }
                    if now < stopAt {
                        sendNext()
                    } else if done.withLockedValue({ $0 += 1; return $0 }) == producers * window {
                        finished.succeed(())
                    }
                }
            }
            for _ in 0..<window { sendNext() }
        }
        let start = monotonicNanos()
        try await finished.futureResult.get()
        let elapsed = Double(monotonicNanos() - start) / 1e9
        await store.close()
        try await group.shutdownGracefully()
        return (Double(count.withLockedValue { $0 }) / elapsed, histograms.withLockedValue { $0 })
    }
}
