import ArgumentParser
import Foundation
import NIOCore
import RelayServer

/// The chat's shape and rates (issue #32): the defaults are the full shape, 10 000 sockets of
/// 5 000 users.
struct ChatOptions: ParsableArguments {
    @Option(help: "Users.") var users = 5000
    @Option(help: "Sockets per user; every socket of a user is in all of the user's rooms.") var devices = 2
    @Option(name: .customLong("rooms-per-user"), help: "Rooms each user is in (at most 100, Relay's per-socket limit).") var roomsPerUser = 20
    @Option(name: .customLong("room-sizes"), help: "Room sizes, SIZE:WEIGHT,… with weights by number of rooms (default: 60 % 1:1, 24 % of 3–5, 8 % of 6–8, 8 % of 10–20; 3.7 members on average).")
    var roomSizes = "2:60,3:10,4:8,5:6,6:4,8:4,10:3,12:2,15:2,20:1"
    @Option(help: "Seed of the rooms, the schedules and the churn.") var seed: UInt64 = 32
    @Option(name: .customLong("message-interval"), help: "Mean seconds between two chat messages of one user (each gap uniform in 0.5–1.5× this), each to one of its rooms at random.")
    var messageInterval = 5.0
    @Option(name: .customLong("message-bytes"), help: "Text bytes per chat message.") var messageBytes = 80
    @Option(name: .customLong("typing-ms"), help: "Mean lead of the typing:start before each message (0.5–1.5× this); typing:stop follows the message. 0: no typing.")
    var typingMs = 2000.0
    @Option(name: .customLong("delivered-delay-ms"), help: "A recipient batches message:delivered per conversation over this long after the first new message. 0: none.")
    var deliveredDelayMs = 1000.0
    @Option(name: .customLong("read-delay-ms"), help: "A recipient reads a conversation this long after its first unread message: one message:read batch for all of them. 0: none.")
    var readDelayMs = 5000.0
    @Option(help: "Fraction of the sockets that disconnect and reconnect (re-auth, rejoin) per second.") var churn = 0.01
    @Option(name: .customLong("offline-ms"), help: "How long a churned socket stays away before it reconnects.") var offlineMs = 1000.0
    @Option(help: "How a socket the server dropped comes back: fixed (after --offline-ms, again after each failed try) or socketio (socket.io-client's default reconnection: 1 s doubling to 5 s, ±50 % jitter). With drops, the report has storm_* lines.")
    var backoff = ReconnectBackoff.fixed
    @Option(help: "Measured seconds.") var duration = 30.0
    @Option(help: "Unmeasured seconds before, with messages, typing, receipts and churn already running.") var warmup = 5.0
    @Option(help: "Seconds after the window for its messages and acks to arrive (nothing new is sent).") var drain = 1.0
    @Option(help: "Event name of a chat message (a custom event on Relay).") var event = "chat:message"
}

/// A chat-shaped mix against one server: U users with D devices each in rooms of 2–20, chat
/// messages with typing bursts, batched delivered/read receipts per conversation, presence
/// from a steady churn of reconnects. Reports the server's CPU per delivered event, delivery
/// latency, receipt ack latency and memory over a steady window.
struct ChatScenario: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "chat", abstract: "Chat-shaped mix: messages, typing, receipts, presence churn.")
    @OptionGroup var common: CommonOptions
    @OptionGroup var chat: ChatOptions

    func validate() throws {
        guard common.wire == .socketio else { throw ValidationError("chat speaks Socket.IO only (--protocol socketio)") }
        guard chat.users >= 2, chat.users <= 1_000_000 else { throw ValidationError("--users is 2…1 000 000") }
        guard chat.devices >= 1, chat.devices <= 20 else { throw ValidationError("--devices is 1…20") }
        guard chat.roomsPerUser >= 1, chat.roomsPerUser <= 100 else { throw ValidationError("--rooms-per-user is 1…100") }
        guard ChatPlan.parseSizes(chat.roomSizes) != nil else { throw ValidationError("--room-sizes takes SIZE:WEIGHT,… with sizes 2…10 000 and positive weights") }
        guard chat.messageInterval > 0, chat.duration > 0, chat.duration <= 3600, chat.warmup >= 0, chat.warmup <= 600, chat.drain >= 0, chat.drain <= 60 else {
            throw ValidationError("--message-interval, --duration (≤ 3600), --warmup (≤ 600) and --drain (≤ 60) must be positive")
        }
        guard chat.churn >= 0, chat.churn <= 1, chat.offlineMs >= 0, chat.typingMs >= 0, chat.deliveredDelayMs >= 0, chat.readDelayMs >= 0, chat.messageBytes >= 0, chat.messageBytes <= 60_000 else {
            throw ValidationError("--churn is 0…1; delays, --typing-ms and --message-bytes (≤ 60 000) are not negative")
        }
    }

    func run() async throws {
        let chat = self.chat
        let plan = ChatPlan(users: chat.users, devices: chat.devices, roomsPerUser: chat.roomsPerUser, sizes: ChatPlan.parseSizes(chat.roomSizes)!, seed: chat.seed)
        let run = LoadRun(options: common)
        let loops = run.board.loops
        let runID = String(UInt32.random(in: 0...UInt32.max), radix: 36)
        let apps = loops.enumerated().map { i, loop in
            ChatLoop(loop: loop, index: i, options: chat, connectors: run.connectors, runID: runID, sourceIP: { run.sourceIP($0) })
        }
        // Each user's token allows exactly its rooms, as a backend would mint it.
        for u in 0..<plan.users {
            let rooms = plan.userRooms[u]
            let token = try await TokenIssuer.sign(secret: common.secret, subject: ChatPlan.userName(u), rooms: rooms.map(ChatPlan.roomName), ttlSeconds: 6 * 3600)
            apps[u % apps.count].addUser(u, rooms: rooms, token: token)
        }

        // Setup: every socket connects with its rooms in the CONNECT, 256 at a time.
        let setupStart = Date()
        let deadline = setupStart.addingTimeInterval(common.setupTimeout)
        var order: [(ChatLoop, Int)] = []
        for app in apps { for i in app.devices.indices { order.append((app, i)) } }
        order.sort { $0.0.devices[$0.1].socket < $1.0.devices[$1.1].socket }
        var connectFailures = 0
        var connectErrors: [String: Int] = [:]
        var next = 0
        try await withThrowingTaskGroup(of: String?.self) { tasks in
            func launch(_ k: Int) {
                let (app, i) = order[k]
                let box = UnsafeSendable(app)
                tasks.addTask {
                    do {
                        try await box.value.loop.flatSubmit { box.value.connect(box.value.devices[i]) }.get()
                        return nil
                    } catch {
                        return String(describing: error).prefix(60).description
                    }
                }
            }
            while next < min(256, order.count) {
                launch(next)
                next += 1
            }
            while let error = try await tasks.next() {
                if let error {
                    connectFailures += 1
                    connectErrors[error, default: 0] += 1
                }
                if next < order.count && Date() < deadline {
                    launch(next)
                    next += 1
                }
            }
        }
        if next < order.count {
            connectFailures += order.count - next
            connectErrors["not opened by the setup deadline", default: 0] += order.count - next
        }
        let setupSeconds = Date().timeIntervalSince(setupStart)
        // The joins' presence events must be over before anything is measured.
        let settle = try await Self.settle(apps)

        // Run: warm-up, the measured window, the drain.
        let rssStart = common.relayPID.flatMap(ProcessStats.rss)
        let t0 = monotonicNanos() + 20_000_000
        let windowStart = t0 + UInt64(chat.warmup * 1e9)
        let windowEnd = windowStart + UInt64(chat.duration * 1e9)
        for app in apps {
            let box = UnsafeSendable(app)
            try await app.loop.submit { box.value.start(at: t0, windowStart: windowStart, windowEnd: windowEnd) }.get()
        }
        try await Self.sleep(until: windowStart)
        let cpuStart = common.relayPID.flatMap(ProcessStats.cpuTimes)
        let ownStart = ProcessStats.cpuMicros(pid: getpid())
        common.mark("measuring")
        try await Self.sleep(until: windowEnd)
        let cpuEnd = common.relayPID.flatMap(ProcessStats.cpuTimes)
        let ownEnd = ProcessStats.cpuMicros(pid: getpid())
        common.mark("done")
        let rssEnd = common.relayPID.flatMap(ProcessStats.rss)
        let fds = common.relayPID.flatMap(ProcessStats.openFiles)
        for app in apps {
            let box = UnsafeSendable(app)
            try await app.loop.submit { box.value.stop() }.get()
        }
        try await Task.sleep(nanoseconds: UInt64(chat.drain * 1e9))

        // Collect, each loop's state read on its loop.
        let stats = ChatStats()
        let storm = StormStats()
        var unanswered = 0
        var online: [Int: [(UInt64, UInt64)]] = [:]
        for app in apps {
            let box = UnsafeSendable(app)
            let part = try await app.loop.submit { () -> UnsafeSendable<(ChatStats, Int, [(Int, [(UInt64, UInt64)])], StormStats)> in
                let copy = ChatStats()
                copy.merge(box.value.stats)
                let stormCopy = StormStats()
                stormCopy.merge(box.value.storm)
                return UnsafeSendable((copy, box.value.unansweredAcks, box.value.onlineIntervals(), stormCopy))
            }.get().value
            stats.merge(part.0)
            storm.merge(part.3)
            unanswered += part.1
            for (socket, intervals) in part.2 { online[socket] = intervals }
        }
        // Expected: every socket of the room online when the message was sent, but its sender.
        var expected = 0
        for s in stats.sends {
            for u in plan.roomMembers[Int(s.room)] {
                for d in 0..<plan.devices {
                    let socket = Int(u) * plan.devices + d
                    guard socket != Int(s.socket), let intervals = online[socket] else { continue }
                    if intervals.contains(where: { $0.0 <= s.t && s.t < $0.1 }) { expected += 1 }
                }
            }
        }
        for app in apps {
            let box = UnsafeSendable(app)
            let closing = try await app.loop.submit { UnsafeSendable(box.value.closeAll()) }.get().value
            for f in closing { try? await f.get() }
        }
        await run.shutdown()

        let seconds = chat.duration
        var report = Report("chat")
        report.add("protocol", common.wire.rawValue)
        report.add("nodes", run.connectors.count)
        report.add("users", plan.users)
        report.add("devices_per_user", plan.devices)
        report.add("sockets", plan.sockets)
        report.add("rooms", plan.roomMembers.count)
        report.add("rooms_per_user_mean", Double(plan.userRooms.reduce(0) { $0 + $1.count }) / Double(max(1, plan.users)))
        report.add("members_per_room_mean", Double(plan.roomMembers.reduce(0) { $0 + $1.count }) / Double(max(1, plan.roomMembers.count)))
        report.add("room_sizes", plan.sizeHistogram.map { "\($0.size):\($0.rooms)" }.joined(separator: ","))
        report.add("seed", Int(truncatingIfNeeded: chat.seed))
        report.add("message_interval_s", chat.messageInterval, "s")
        report.add("typing_ms", chat.typingMs, "ms")
        report.add("delivered_delay_ms", chat.deliveredDelayMs, "ms")
        report.add("read_delay_ms", chat.readDelayMs, "ms")
        report.add("churn_per_second", chat.churn)
        report.add("setup_seconds", setupSeconds, "s")
        report.add("settle_seconds", settle.seconds, "s")
        if !settle.settled { report.add("error[not_settled]", 1) }
        report.add("window_seconds", seconds, "s")
        report.add("messages_sent", stats.messagesSent)
        report.add("messages_per_second", Double(stats.messagesSent) / seconds)
        report.add("messages_skipped_offline", stats.messagesSkippedOffline)
        report.add("message_deliveries_expected", expected)
        report.add("message_deliveries", stats.messagesReceived)
        report.add("message_delivery_ratio", expected > 0 ? Double(stats.messagesReceived) / Double(expected) : 0)
        report.addLatency("latency", stats.latency)
        report.add("message_acks", stats.messageAcks)
        report.addLatency("message_ack", stats.messageAck)
        report.add("typing_sent", stats.typingSent)
        report.add("receipt_batches_sent", stats.receiptBatchesSent)
        report.add("receipt_items_sent", stats.receiptItemsSent)
        report.add("receipt_batches_acked", stats.receiptBatchesAcked)
        report.add("receipt_items_acked", stats.receiptItemsAcked)
        report.add("receipt_items_per_second", Double(stats.receiptItemsAcked) / seconds)
        report.addLatency("receipt_ack", stats.receiptAck)
        report.add("receipts_skipped_offline", stats.receiptsSkippedOffline)
        report.add("deliveries.message", stats.chatDeliveries)
        report.add("deliveries.typing", stats.typingDeliveries)
        report.add("deliveries.receipt", stats.receiptDeliveries)
        report.add("deliveries.presence", stats.presenceDeliveries)
        report.add("deliveries.other", stats.otherDeliveries)
        report.add("deliveries", stats.deliveries)
        report.add("deliveries_per_second", Double(stats.deliveries) / seconds)
        report.add("reconnects_started", stats.reconnectsStarted)
        report.add("reconnects_done", stats.reconnectsDone)
        report.add("reconnects_per_second", Double(stats.reconnectsDone) / seconds)
        report.add("reconnect_failures", stats.reconnectFailures)
        report.addLatency("reconnect", stats.reconnectTime)
        report.add("acks_lost_to_churn", stats.acksLostToChurn)
        storm.report(into: &report)
        if let a = cpuStart, let b = cpuEnd {
            let user = b.user - a.user, system = b.system - a.system
            report.add("relay_cpu_seconds", Double(user + system) / 1e6, "s")
            report.add("relay_cpu_cores", Double(user + system) / 1e6 / seconds)
            if stats.deliveries > 0 {
                report.add("relay_cpu_us_per_delivery", Double(user + system) / Double(stats.deliveries), "µs")
                report.add("relay_user_us_per_delivery", Double(user) / Double(stats.deliveries), "µs")
                report.add("relay_sys_us_per_delivery", Double(system) / Double(stats.deliveries), "µs")
            }
            if stats.messagesSent > 0 { report.add("relay_cpu_us_per_message", Double(user + system) / Double(stats.messagesSent), "µs") }
        }
        if let a = rssStart, let b = rssEnd {
            report.add("relay_rss_mb", Double(b) / 1_048_576, "MiB")
            report.add("relay_rss_growth_mb", Double(b - a) / 1_048_576, "MiB")
        }
        if let fds { report.add("relay_open_files", fds) }
        // The generator shares the machine: what it took of it over the same window.
        if let a = ownStart, let b = ownEnd { report.add("generator_cpu_cores", Double(b - a) / 1e6 / seconds) }
        for (code, n) in stats.closes.sorted(by: { $0.key < $1.key }) { report.add("closed_by_server[\(code)]", n) }
        for (e, n) in stats.errors.sorted(by: { $0.key < $1.key }) { report.add("error[\(e)]", n) }
        for (code, n) in stats.ackErrors.sorted(by: { $0.key < $1.key }) { report.add("ack_error[\(code)]", n) }
        if unanswered > 0 { report.add("error[acks_unanswered]", unanswered) }
        report.add("connect_failures", connectFailures)
        for (e, n) in connectErrors.sorted(by: { $0.key < $1.key }) { report.add("connect_error[\(e)]", n) }
        let missing = max(0, expected - stats.messagesReceived)
        report.add("message_deliveries_missing", missing)
        let errors = connectFailures + missing + unanswered + stats.reconnectFailures + (settle.settled ? 0 : 1)
            + stats.errors.values.reduce(0, +) + stats.ackErrors.values.reduce(0, +)
        let operations = plan.sockets + expected + stats.receiptBatchesSent + stats.messagesSent + stats.reconnectsStarted
        try finish(report, errors: errors, operations: max(1, operations), options: common)
    }

    /// Waits until no event arrived on any socket for `quiet` seconds (or `timeout` passed).
    static func settle(_ apps: [ChatLoop], quiet: Double = 0.5, timeout: Double = 300) async throws -> (seconds: Double, settled: Bool) {
        func events() async throws -> Int {
            var total = 0
            for app in apps {
                let box = UnsafeSendable(app)
                total += try await app.loop.submit { box.value.stats.events }.get()
            }
            return total
        }
        let start = Date()
        var last = try await events()
        var quietSince = Date()
        while Date().timeIntervalSince(start) < timeout {
            try await Task.sleep(nanoseconds: 100_000_000)
            let now = try await events()
            if now != last {
                last = now
                quietSince = Date()
            } else if Date().timeIntervalSince(quietSince) >= quiet {
                return (Date().timeIntervalSince(start), true)
            }
        }
        return (Date().timeIntervalSince(start), false)
    }

    static func sleep(until t: UInt64) async throws {
        let now = monotonicNanos()
        if t > now { try await Task.sleep(nanoseconds: t - now) }
    }
}
