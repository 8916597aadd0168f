import Foundation
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import RelayServer

/// The shared machinery of a scenario run: event loops, stats, tokens, opening sockets, and the
/// rate driver.
final class LoadRun: @unchecked Sendable {
    let options: CommonOptions
    let group: MultiThreadedEventLoopGroup
    let board: StatsBoard
    let connector: Connector
    /// One connector per node in multi-node mode.
    let connectors: [Connector]
    private(set) var connectFailures = 0
    private(set) var connectErrors: [String: Int] = [:]

    init(options: CommonOptions) {
        self.options = options
        group = MultiThreadedEventLoopGroup(numberOfThreads: options.threads)
        board = StatsBoard(group: group)
        let path = options.path ?? (options.wire == .socketio ? "/socket.io/?EIO=4&transport=websocket" : "/")
        connector = Connector(group: group, board: board, target: Target(host: options.host, port: options.port, path: path), wire: options.wire)
        if let nodes = options.nodes {
            let (group, board, wire) = (self.group, self.board, options.wire)
            connectors = nodes.split(separator: ",").map { n in
                let parts = n.split(separator: ":")
                return Connector(group: group, board: board, target: Target(host: String(parts[0]), port: Int(parts[1])!, path: path), wire: wire)
            }
        } else {
            connectors = [connector]
        }
    }

    func shutdown() async {
        try? await group.shutdownGracefully()
    }

    /// A token for `user` allowed in every `bench-*` room (Socket.IO mode only).
    func token(for user: String) async throws -> String {
        guard options.wire == .socketio else { return "" }
        return try await TokenIssuer.sign(secret: options.secret, subject: user, rooms: ["bench-*"], ttlSeconds: 3600)
    }

    /// The loopback source address of socket `i` (127.0.0.2 …), so ephemeral ports never run out.
    func sourceIP(_ i: Int) -> String? {
        guard options.sourceAddresses > 0 else { return nil }
        let n = i % options.sourceAddresses + 2
        return "127.0.\(n / 256).\(n % 256)"
    }

    /// Opens `count` sockets, `room(i)` for each, at most `concurrency` handshakes in flight.
    /// `offset` shifts user names and source addresses (several generator processes).
    func openMany(_ count: Int, concurrency: Int = 256, deadline: Date, offset: Int = 0, room: @escaping (Int) -> String?, user: @escaping (Int) -> String = { "user-\($0)" }, observer: @escaping (Int) -> Bool = { _ in false }) async throws -> [OpenedConnection] {
        let loops = board.loops
        var opened: [OpenedConnection?] = Array(repeating: nil, count: count)
        var next = 0
        try await withThrowingTaskGroup(of: (Int, OpenedConnection?, String?).self) { tasks in
            func launch(_ i: Int) async throws {
                let token = try await self.token(for: user(i + offset))
                let loop = loops[i % loops.count]
                let src = sourceIP(i + offset)
                let r = room(i)
                let obs = observer(i)
                // Multi-node: socket i goes to node i mod N, so every room spans the nodes.
                let connector = connectors[i % connectors.count]
                tasks.addTask {
                    do {
                        let c = try await connector.open(on: loop, token: token, room: r, sourceIP: src, observesTyping: obs).get()
                        return (i, c, nil)
                    } catch {
                        return (i, nil, String(describing: error).prefix(60).description)
                    }
                }
            }
            while next < min(concurrency, count) {
                try await launch(next)
                next += 1
            }
            while let (i, c, error) = try await tasks.next() {
                opened[i] = c
                if let error {
                    connectFailures += 1
                    connectErrors[error, default: 0] += 1
                }
                if next < count && Date() < deadline {
                    try await launch(next)
                    next += 1
                }
            }
        }
        // Sockets never tried because the deadline passed are failures too: a run with fewer
        // members than asked must not pass for one with all of them.
        if next < count {
            connectFailures += count - next
            connectErrors["not opened by the setup deadline", default: 0] += count - next
        }
        return opened.compactMap { $0 }
    }

    /// Calls `send(connection)` for the senders at `ratePerSecond` in total, spread over the
    /// senders round-robin, for `seconds`. Each loop drives its own senders from a 1 ms tick.
    func drive(senders: [OpenedConnection], ratePerSecond: Double, seconds: Double, send: @escaping @Sendable (LoadConnection) -> Void) async throws {
        let loops = board.loops
        var byLoop: [ObjectIdentifier: [OpenedConnection]] = [:]
        for s in senders { byLoop[ObjectIdentifier(s.channel.eventLoop), default: []].append(s) }
        let start = monotonicNanos()
        let end = start + UInt64(seconds * 1e9)
        var tasks: [RepeatedTask] = []
        for loop in loops {
            guard let mine = byLoop[ObjectIdentifier(loop)], !mine.isEmpty else { continue }
            let share = ratePerSecond * Double(mine.count) / Double(senders.count)
            let state = UnsafeSendable(DriverState())  // touched only on `loop`
            let list = UnsafeSendable(mine)
            tasks.append(loop.scheduleRepeatedTask(initialDelay: .zero, delay: .milliseconds(1)) { _ in
                let now = monotonicNanos()
                guard now < end else { return }
                let due = Int(Double(now - start) / 1e9 * share)
                let s = state.value
                while s.sent < due {
                    let c = list.value[s.cursor % list.value.count]
                    s.cursor += 1
                    s.sent += 1
                    send(c.connection)
                }
            })
        }
        try await Task.sleep(nanoseconds: UInt64(seconds * 1e9))
        for t in tasks { t.cancel() }
    }

    /// Closes every socket.
    /// Waits until the server has stopped sending: no event arrived on any socket for `quiet`
    /// seconds, or `timeout` passed. Joins send every member a `presence:join` for each later
    /// joiner, so a room of N members costs about N²/2 deliveries to set up (50 M for 10 000)
    /// and the server may still be sending them after the last join was acked. A measured
    /// window that opens before they are done measures them too. Returns the seconds waited
    /// and whether it went quiet.
    func settle(quiet: Double = 0.5, timeout: Double = 300) async throws -> (seconds: Double, settled: Bool) {
        let start = Date()
        var last = try await board.events()
        var quietSince = Date()
        while Date().timeIntervalSince(start) < timeout {
            try await Task.sleep(nanoseconds: 100_000_000)
            let now = try await board.events()
            if now != last {
                last = now
                quietSince = Date()
            } else if Date().timeIntervalSince(quietSince) >= quiet {
                return (Date().timeIntervalSince(start), true)
            }
        }
        return (Date().timeIntervalSince(start), false)
    }

    func closeAll(_ connections: [OpenedConnection]) async {
        for c in connections { c.channel.close(promise: nil) }
        for c in connections { try? await c.channel.closeFuture.get() }
    }
}

final class DriverState {
    var sent = 0
    var cursor = 0
}
