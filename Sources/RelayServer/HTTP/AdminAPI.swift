import Foundation
import NIOCore
import NIOHTTP1
import RelayCore
import RelayStore

/// `/admin/v1/…` (admin bearer key): health, readiness, stats, rooms, connections, kick, emit,
/// receipts, and the live stats stream the dashboard reads. Every answer is a JSON object.
struct AdminAPI {
    let relay: RelayContext
    static let startedAt = Date()

    func handle(_ request: HTTPRequest, query: QueryString, on loop: any EventLoop) -> EventLoopFuture<HTTPResponse> {
        let parts = query.path.dropFirst("/admin/v1/".count).split(separator: "/", omittingEmptySubsequences: false).map { QueryString.decode($0) }
        let now = { (r: HTTPResponse) in loop.makeSucceededFuture(r) }
        switch (request.method, parts.first ?? "", parts.count) {
        case (.GET, "health", 1):
            return now(.json(.ok, ["status": "ok", "uptimeSeconds": .int(Int64(Date().timeIntervalSince(Self.startedAt)))]))
        case (.GET, "ready", 1):
            return readiness(on: loop, detailed: true)
        case (.GET, "stats", 1):
            return now(.json(.ok, stats()))
        case (.GET, "stream", 1):
            var r = HTTPResponse(status: .ok, contentType: "text/event-stream; charset=utf-8", body: sse(stats()))
            let admin = self
            r.stream = .init(interval: .seconds(1)) { admin.sse(admin.stats()) }
            return now(r)
        case (.GET, "rooms", 1):
            return now(rooms(query))
        case (.GET, "rooms", 2):
            return now(room(parts[1]))
        case (.GET, "users", 3) where parts[2] == "connections":
            return now(connections(of: parts[1]))
        case (.DELETE, "connections", 2):
            let kicked = relay.hub.kick(sid: parts[1], code: CloseCode.kicked, reason: "kicked by an operator")
            return now(kicked ? .json(.ok, ["kicked": true, "sid": .string(parts[1])]) : .error(.notFound, code: "not_found", message: "no connection with sid \(parts[1])"))
        case (.POST, "emit", 1):
            return EmitEndpoint(hub: relay.hub).handle(request.body, on: loop)
        case (.GET, "receipts", 1):
            return ReceiptsEndpoint(store: relay.receipts).handle(query: query, on: loop)
        case (_, "health", 1), (_, "ready", 1), (_, "stats", 1), (_, "stream", 1), (_, "rooms", _), (_, "users", _), (_, "connections", _), (_, "emit", 1), (_, "receipts", 1):
            return now(.error(.methodNotAllowed, code: "method_not_allowed", message: "method not allowed"))
        default:
            return now(.error(.notFound, code: "not_found", message: "no such admin endpoint"))
        }
    }

    /// Readiness: the receipt store takes a write (and, with Redis, the link is up).
    func readiness(on loop: any EventLoop, detailed: Bool) -> EventLoopFuture<HTTPResponse> {
        // Without Redis a node still serves its own sockets (degraded), so it stays ready and says so.
        let redis: [(String, JSONValue)] = relay.hub.backends.cluster.map { cluster in
            [
                ("redis", .string(cluster.isUp ? "up" : "down")), ("degraded", .bool(!cluster.isUp)), ("node", .string(cluster.nodeID)),
                ("redisTopology", .string(cluster.redis.currentTopology.rawValue)),
            ]
        } ?? []
        guard let store = relay.receipts else {
            return loop.makeSucceededFuture(.json(.ok, .object([("ready", true), ("store", "disabled")] + redis)))
        }
        return store.checkWritable(on: loop).map {
            HTTPResponse.json(.ok, .object([("ready", true), ("store", "ok")] + redis))
        }.recover { error in
            HTTPResponse.json(.serviceUnavailable, .object([("ready", false), ("store", .string(detailed ? "\(error)" : "unavailable"))] + redis))
        }
    }

    func stats() -> JSONValue {
        let hub = relay.hub
        let m = hub.metrics
        func ms(_ h: AtomicHistogram?, _ q: Double) -> JSONValue {
            guard let v = h?.quantile(q) else { return .null }
            return .double((v * 1000 * 1000).rounded() / 1000)
        }
        let fanout = m.histogram("relay_fanout_seconds")
        let commit = m.histogram("relay_receipt_commit_seconds")
        let lag = m.histogram("relay_event_loop_lag_seconds")
        let busiest = hub.rooms.busiestRooms(limit: 10).map { r -> JSONValue in
            ["room": .string(r.room), "members": .int(Int64(r.members)), "users": .int(Int64(r.users))]
        }
        return [
            "version": .string(RelayVersion.string),
            "uptimeSeconds": .int(Int64(Date().timeIntervalSince(Self.startedAt))),
            "timeMs": .int(hub.clock.wallMs()),
            "connections": .int(Int64(hub.connectionCount)),
            "users": .int(Int64(hub.registry.userCount)),
            "rooms": .int(Int64(hub.rooms.roomCount)),
            "tcpConnections": .int(Int64(relay.admission.openConnections)),
            "eventsIn": .int(m.eventsInTotal),
            "eventsOut": .int(m.eventsOutTotal),
            "deliveries": .int(m.counterValue("relay_deliveries_total")),
            "coalesced": .int(m.counterValue("relay_coalesced_total")),
            "dropped": .int(m.counterValue("relay_dropped_total")),
            "slowConsumerCloses": .int(m.counterValue("relay_slow_consumer_closes_total")),
            "receiptsStored": .int(m.counterValue("relay_receipts_stored_total")),
            "fanoutLatencyMs": ["p50": ms(fanout, 0.5), "p99": ms(fanout, 0.99)],
            "receiptCommitMs": ["p50": ms(commit, 0.5), "p99": ms(commit, 0.99)],
            "eventLoopLagMs": ["p99": ms(lag, 0.99)],
            "rssBytes": ProcessMemory.residentBytes().map { .int(Int64($0)) } ?? .null,
            "busiestRooms": .array(busiest),
            "cluster": hub.backends.cluster.map { c in
                ["node": .string(c.nodeID), "redis": .string(c.isUp ? "up" : "down"), "redisTopology": .string(c.redis.currentTopology.rawValue)]
            } ?? .null,
        ]
    }

    func sse(_ value: JSONValue) -> [UInt8] {
        var out = Array("event: stats\ndata: ".utf8)
        JSONWriter.write(value, into: &out)
        out += Array("\n\n".utf8)
        return out
    }

    func rooms(_ query: QueryString) -> HTTPResponse {
        let limit = min(max(Int(query["limit"] ?? "") ?? 50, 1), 500)
        let offset = max(Int(query["cursor"] ?? "") ?? 0, 0)
        let page = relay.hub.rooms.roomsPage(prefix: query["prefix"], offset: offset, limit: limit)
        let next: JSONValue = offset + page.rooms.count < page.total ? .string(String(offset + page.rooms.count)) : .null
        let rooms = page.rooms.map { r -> JSONValue in
            ["room": .string(r.room), "members": .int(Int64(r.members)), "users": .int(Int64(r.users))]
        }
        return .json(.ok, ["rooms": .array(rooms), "next": next, "total": .int(Int64(page.total))])
    }

    func room(_ name: String) -> HTTPResponse {
        let presence = relay.hub.rooms.presence(room: name)
        guard !presence.isEmpty else { return .error(.notFound, code: "not_found", message: "no room \(name) with members") }
        let devices = presence.reduce(0) { $0 + $1.devices }
        return .json(.ok, ["room": .string(name), "members": .int(Int64(devices)), "presence": .array(presence.map(\.json))])
    }

    func connections(of user: String) -> HTTPResponse {
        let list = relay.hub.connections(of: user).map { info, rooms -> JSONValue in
            [
                "sid": .string(info.sid), "user": .string(info.user), "ip": .string(info.ip),
                "connectedAt": .int(info.connectedAtMs), "deflate": .bool(info.deflate), "loop": .int(Int64(info.loop)),
                "rooms": .array(rooms.map { .string($0) }),
            ]
        }
        return .json(.ok, ["user": .string(user), "connections": .array(list)])
    }
}
