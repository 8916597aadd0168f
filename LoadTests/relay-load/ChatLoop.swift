import NIOCore

/// One event loop's share of the `chat` scenario: the users whose number mod the loop count is
/// its index, with all their devices (so a user's state never crosses threads), their message
/// and typing schedules, the receipts they owe, and the churn of their sockets. Touched only on
/// its loop once `start` ran (built before any of its sockets exist).
final class ChatLoop: @unchecked Sendable {
    let loop: any EventLoop
    let options: ChatOptions
    let stats = ChatStats()
    let storm = StormStats()
    private let connectors: [Connector]
    private let sourceIP: @Sendable (Int) -> String?
    private(set) var users: [ChatUser] = []
    private(set) var devices: [ChatDevice] = []
    private var schedule = ChatSchedule()
    private var rng: SplitMix64
    private var windowStart: UInt64 = .max
    private var windowEnd: UInt64 = .max
    /// Messages, typing, receipts and churn run (from `start` to `stop`).
    private var sending = false
    /// Sockets away come back (from `start` to `closeAll`).
    private var reconnecting = false
    private var churnStart: UInt64 = 0
    private var churned = 0
    private var ticker: RepeatedTask?
    /// Makes message ids unique per run (receipts are idempotent per message id, user and kind).
    private let runID: String
    private let text: String

    init(loop: any EventLoop, index: Int, options: ChatOptions, connectors: [Connector], runID: String, sourceIP: @escaping @Sendable (Int) -> String?) {
        self.loop = loop
        self.options = options
        self.connectors = connectors
        self.runID = runID
        self.sourceIP = sourceIP
        rng = SplitMix64(seed: options.seed &+ 0x1000 &+ UInt64(index))
        text = String(repeating: "x", count: max(0, options.messageBytes))
    }

    /// Adds a user and its devices (before the loop runs anything of this scenario).
    func addUser(_ number: Int, rooms: [Int32], token: String) {
        let user = ChatUser(number: number, rooms: rooms, token: token, local: users.count)
        for d in 0..<options.devices {
            let device = ChatDevice(socket: number * options.devices + d, user: user, local: devices.count)
            user.devices.append(device)
            devices.append(device)
        }
        users.append(user)
    }

    @inline(__always) private func inWindow(_ t: UInt64) -> Bool { t >= windowStart && t < windowEnd }

    // MARK: Sockets

    /// Opens `device`'s socket; succeeds once its CONNECT (with its rooms) was answered.
    func connect(_ device: ChatDevice) -> EventLoopFuture<Void> {
        let ready = loop.makePromise(of: Void.self)
        let started = monotonicNanos()
        let app = UnsafeSendable(self)
        let dev = UnsafeSendable(device)
        let connector = connectors[device.socket % connectors.count]
        connector.open(on: loop, sourceIP: sourceIP(device.socket), ready: ready) { _ in
            ChatConnection(app: app.value, device: dev.value, ready: ready, startedAt: started)
        }.whenFailure { ready.fail($0) }
        return ready.futureResult
    }

    func connected(_ c: ChatConnection, now: UInt64) {
        let d = c.device
        d.connection = c
        d.channel = c.context?.channel
        d.online = true
        d.onlineSince = now
        if d.reconnectCounted {
            d.reconnectCounted = false
            stats.reconnectsDone += 1
            stats.reconnectTime.record((now &- c.startedAt) / 1000)
        }
        if d.droppedAt != 0 {
            storm.back(droppedAt: d.droppedAt, now: now)
            d.droppedAt = 0
        }
        d.failedTries = 0
    }

    func closed(_ c: ChatConnection) {
        if c.closingByUs {
            stats.acksLostToChurn += c.unansweredInWindow
            return
        }
        let d = c.device
        guard d.connection === c else { return }
        let now = monotonicNanos()
        offline(d, now: now)
        stats.errors["unexpected_close", default: 0] += 1
        stats.errors["acks_lost_to_unexpected_close", default: 0] += c.unansweredInWindow
        if d.droppedAt == 0 {
            d.droppedAt = now
            storm.dropped(at: now)
        }
        // An app reconnects by itself.
        d.failedTries = 0
        if reconnecting { later(.reconnect(device: Int32(d.local)), after: reconnectDelay(d)) }
    }

    /// Milliseconds before `d`'s next try, by `--backoff`.
    private func reconnectDelay(_ d: ChatDevice) -> Double {
        options.backoff.delayMs(attempt: d.failedTries, offlineMs: options.offlineMs, unit: rng.unit())
    }

    // MARK: Arrivals

    private func offline(_ d: ChatDevice, now: UInt64) {
        d.connection = nil
        d.channel = nil
        d.online = false
        d.intervals.append((d.onlineSince, now))
    }

    @inline(__always) func arrived(now: UInt64, _ count: (ChatStats) -> Void) {
        if inWindow(now) { count(stats) }
    }

    /// A chat message arrived at `device`: timed, and owed receipts by its user (on the user's
    /// first online device only: the same message reaches every device of the user).
    func chatMessage(to device: ChatDevice, sentAt: Int64, room: Int64, from: Int64, now: UInt64, messageID: () -> String?) {
        if inWindow(now) { stats.chatDeliveries += 1 }
        if sentAt > 0, inWindow(UInt64(sentAt)) {
            stats.messagesReceived += 1
            if now > UInt64(sentAt) { stats.latency.record((now - UInt64(sentAt)) / 1000) }
        }
        let user = device.user
        guard sending, from >= 0, from != user.number, room >= 0, user.firstOnline === device else { return }
        let (delivered, read) = (options.deliveredDelayMs, options.readDelayMs)
        guard delivered > 0 || read > 0, let id = messageID() else { return }
        let r = Int32(room)
        var pending = user.pending[r] ?? PendingReceipts()
        if delivered > 0 {
            if pending.delivered.isEmpty { later(.flush(user: Int32(user.local), room: r, read: false), after: delivered) }
            pending.delivered.append((id, Int(from)))
        }
        if read > 0 {
            if pending.read.isEmpty { later(.flush(user: Int32(user.local), room: r, read: true), after: read) }
            pending.read.append((id, Int(from)))
        }
        user.pending[r] = pending
    }

    // MARK: Running

    /// Starts the users' schedules and the churn at `t0`; arrivals and sends count from
    /// `windowStart` to `windowEnd`.
    func start(at t0: UInt64, windowStart: UInt64, windowEnd: UInt64) {
        self.windowStart = windowStart
        self.windowEnd = windowEnd
        sending = true
        reconnecting = true
        churnStart = t0
        // Each user's first message falls anywhere in its first interval, so the senders are
        // spread out from the start.
        for u in users { scheduleNext(u, after: t0, firstGap: rng.unit() * options.messageInterval) }
        ticker = loop.scheduleRepeatedTask(initialDelay: .zero, delay: .milliseconds(1)) { [weak self] _ in self?.tick() }
    }

    /// No new messages, typing, receipts or churn (acks and deliveries still count, sockets
    /// away still come back).
    func stop() {
        sending = false
    }

    private func tick() {
        let now = monotonicNanos()
        while let next = schedule.first, next.time <= now {
            schedule.removeFirst()
            if case .reconnect = next.action {
                if reconnecting { perform(next.action, now: now) }
            } else if sending {
                perform(next.action, now: now)
            }
        }
        guard sending else { return }
        // Churn: `churn` of this loop's sockets per second, picked at random among the online ones.
        let due = now > churnStart ? Int(Double(now - churnStart) / 1e9 * options.churn * Double(devices.count)) : 0
        while churned < due {
            churned += 1
            for _ in 0..<8 {
                let d = devices[rng.below(devices.count)]
                guard d.online, let c = d.connection else { continue }
                // Offline from now: what is sent from here on is not expected to reach it.
                offline(d, now: now)
                c.close()
                later(.reconnect(device: Int32(d.local)), after: options.offlineMs)
                break
            }
        }
    }

    private func later(_ action: ChatAction, after ms: Double) {
        schedule.insert(monotonicNanos() + UInt64(ms * 1e6), action)
    }

    /// Schedules `user`'s next message (to one of its rooms at random, from one of its devices
    /// at random) and the typing burst before it.
    private func scheduleNext(_ user: ChatUser, after t: UInt64, firstGap: Double? = nil) {
        let gap = firstGap ?? options.messageInterval * (0.5 + rng.unit())
        let at = t + UInt64(gap * 1e9)
        let room = user.rooms.isEmpty ? -1 : user.rooms[rng.below(user.rooms.count)]
        let device = Int8(rng.below(user.devices.count))
        if room < 0 { return }
        if options.typingMs > 0 {
            let lead = min(options.typingMs * (0.5 + rng.unit()) * 1e6, Double(at - t) * 0.9)
            schedule.insert(at - UInt64(lead), .typing(user: Int32(user.local), room: room, device: device))
        }
        schedule.insert(at, .message(user: Int32(user.local), room: room, device: device))
    }

    private func perform(_ action: ChatAction, now: UInt64) {
        switch action {
        case .typing(let u, let room, let device):
            guard let d = users[Int(u)].online(preferring: Int(device)), let c = d.connection else { return }
            c.emit("typing:start", "{\"room\":\"\(ChatPlan.roomName(room))\"}", ack: nil, inWindow: inWindow(now))
            if inWindow(now) { stats.typingSent += 1 }
        case .message(let u, let room, let device):
            let user = users[Int(u)]
            scheduleNext(user, after: now)
            guard let d = user.online(preferring: Int(device)), let c = d.connection else {
                if inWindow(now) { stats.messagesSkippedOffline += 1 }
                return
            }
            user.sequence += 1
            let t = monotonicNanos()
            let window = inWindow(t)
            let name = ChatPlan.roomName(room)
            c.emit(
                options.event, "{\"room\":\"\(name)\",\"messageId\":\"m\(runID)-\(user.number)-\(user.sequence)\",\"text\":\"\(text)\",\"t\":\(t)}",
                ack: .message, inWindow: window)
            if options.typingMs > 0 { c.emit("typing:stop", "{\"room\":\"\(name)\"}", ack: nil, inWindow: window) }
            if window {
                stats.messagesSent += 1
                stats.sends.append((t, room, Int32(d.socket)))
                if options.typingMs > 0 { stats.typingSent += 1 }
            }
        case .flush(let u, let room, let read):
            let user = users[Int(u)]
            guard var pending = user.pending[room] else { return }
            let items = read ? pending.read : pending.delivered
            if read { pending.read = [] } else { pending.delivered = [] }
            user.pending[room] = pending.delivered.isEmpty && pending.read.isEmpty ? nil : pending
            guard !items.isEmpty else { return }
            guard let d = user.firstOnline, let c = d.connection else {
                if inWindow(now) { stats.receiptsSkippedOffline += items.count }
                return
            }
            let window = inWindow(now)
            // At most 100 receipts per batch (PROTOCOL §4).
            var i = 0
            while i < items.count {
                let chunk = items[i..<min(i + 100, items.count)]
                i += chunk.count
                let list = chunk.map { "{\"messageId\":\"\($0.0)\",\"authorId\":\"\(ChatPlan.userName($0.1))\"}" }.joined(separator: ",")
                c.emit(read ? "message:read" : "message:delivered", "{\"room\":\"\(ChatPlan.roomName(room))\",\"items\":[\(list)]}", ack: .receipt(items: chunk.count), inWindow: window)
                if window {
                    stats.receiptBatchesSent += 1
                    stats.receiptItemsSent += chunk.count
                }
            }
        case .reconnect(let index):
            let d = devices[Int(index)]
            guard !d.online, d.connection == nil else { return }
            d.reconnectCounted = inWindow(now)
            if d.reconnectCounted { stats.reconnectsStarted += 1 }
            let dropped = d.droppedAt != 0
            connect(d).whenComplete { [weak self] result in
                guard let self else { return }
                let d = self.devices[Int(index)]
                var failure: String?
                if case .failure(let error) = result { failure = String(describing: error).prefix(60).description }
                if dropped { self.storm.attempt(startedAt: now, now: monotonicNanos(), failure: failure) }
                guard let failure else { return }
                if d.reconnectCounted {
                    d.reconnectCounted = false
                    self.stats.reconnectFailures += 1
                }
                self.stats.errors["reconnect_failed[\(failure)]", default: 0] += 1
                // Try again, as an app would.
                d.failedTries += 1
                if self.reconnecting { self.later(.reconnect(device: index), after: self.reconnectDelay(d)) }
            }
        }
    }

    // MARK: The end

    /// Acks asked inside the window that are still unanswered.
    var unansweredAcks: Int { devices.reduce(0) { $0 + ($1.connection?.unansweredInWindow ?? 0) } }

    /// When each socket was online: (socket, [(from, to)]), up to now.
    func onlineIntervals() -> [(Int, [(UInt64, UInt64)])] {
        devices.map { d in (d.socket, d.online ? d.intervals + [(d.onlineSince, UInt64.max)] : d.intervals) }
    }

    /// Stops everything and closes every socket; the futures complete when they are closed.
    func closeAll() -> [EventLoopFuture<Void>] {
        sending = false
        reconnecting = false
        ticker?.cancel()
        ticker = nil
        return devices.compactMap { d in
            d.connection?.closingByUs = true
            guard let channel = d.channel else { return nil }
            channel.close(promise: nil)
            return channel.closeFuture
        }
    }
}

/// A user of the scenario: its rooms, its token, its devices, the receipts it owes.
final class ChatUser {
    let number: Int
    let rooms: [Int32]
    /// The rooms as a JSON array, for the CONNECT auth.
    let roomsJSON: String
    let token: String
    /// Index in its loop's `users`.
    let local: Int
    var devices: [ChatDevice] = []
    /// Per room: messages received and not yet acknowledged as delivered / read.
    var pending: [Int32: PendingReceipts] = [:]
    var sequence = 0

    init(number: Int, rooms: [Int32], token: String, local: Int) {
        self.number = number
        self.rooms = rooms
        self.token = token
        self.local = local
        roomsJSON = "[" + rooms.map { "\"\(ChatPlan.roomName($0))\"" }.joined(separator: ",") + "]"
    }

    /// The user's first device that is online: the one that sends its receipts.
    var firstOnline: ChatDevice? { devices.first { $0.online } }

    /// Device `preferred` when online, else any online device.
    func online(preferring preferred: Int) -> ChatDevice? {
        preferred < devices.count && devices[preferred].online ? devices[preferred] : firstOnline
    }
}

/// One socket of a user (a phone, a laptop).
final class ChatDevice {
    /// The socket's number in the whole run: user × devices + device.
    let socket: Int
    unowned let user: ChatUser
    var connection: ChatConnection?
    var channel: (any Channel)?
    var online = false
    var onlineSince: UInt64 = 0
    /// Past online periods (monotonic ns).
    var intervals: [(UInt64, UInt64)] = []
    /// A reconnect of this socket started inside the window and is not done yet.
    var reconnectCounted = false
    /// When the server dropped it (monotonic ns; 0: it is not away by the server's doing).
    var droppedAt: UInt64 = 0
    /// Tries that failed since it went away (the backoff's attempt number).
    var failedTries = 0
    /// Index in its loop's `devices`.
    let local: Int

    init(socket: Int, user: ChatUser, local: Int) {
        self.socket = socket
        self.user = user
        self.local = local
    }
}

struct PendingReceipts {
    var delivered: [(String, Int)] = []
    var read: [(String, Int)] = []
}

enum ChatAction {
    case typing(user: Int32, room: Int32, device: Int8)
    case message(user: Int32, room: Int32, device: Int8)
    case flush(user: Int32, room: Int32, read: Bool)
    case reconnect(device: Int32)
}

/// The loop's pending actions, soonest first (a binary heap; ties in insertion order).
struct ChatSchedule {
    private var heap: [(time: UInt64, seq: UInt64, action: ChatAction)] = []
    private var seq: UInt64 = 0

    var first: (time: UInt64, action: ChatAction)? { heap.first.map { ($0.time, $0.action) } }

    mutating func insert(_ time: UInt64, _ action: ChatAction) {
        seq += 1
        heap.append((time, seq, action))
        var i = heap.count - 1
        while i > 0 {
            let parent = (i - 1) / 2
            guard less(i, parent) else { break }
            heap.swapAt(i, parent)
            i = parent
        }
    }

    mutating func removeFirst() {
        guard !heap.isEmpty else { return }
        heap.swapAt(0, heap.count - 1)
        heap.removeLast()
        var i = 0
        while true {
            let l = 2 * i + 1, r = l + 1
            var m = i
            if l < heap.count && less(l, m) { m = l }
            if r < heap.count && less(r, m) { m = r }
            if m == i { break }
            heap.swapAt(i, m)
            i = m
        }
    }

    private func less(_ a: Int, _ b: Int) -> Bool {
        heap[a].time != heap[b].time ? heap[a].time < heap[b].time : heap[a].seq < heap[b].seq
    }
}
