import NIOCore
import NIOHTTP1
import RelayCore

/// Maps requests to answers: the backend emit API, health, and Engine.IO refusals.
struct HTTPRouter: Sendable {
    let relay: RelayContext

    /// How much of a request's body is kept, decided from its head before any of it is read:
    /// an API or admin body only with the right key (a wrong one is answered 401 with its body
    /// never buffered), a polling `POST` as its session allows, nothing for any other route.
    func bodyPolicy(for head: HTTPRequestHead) -> BodyPolicy {
        let query = QueryString(uri: head.uri)
        if query.path == "/socket.io/" || query.path == "/socket.io" {
            return head.method == .POST ? PollingEndpoint.bodyAdmission(for: query, relay: relay) : .discard
        }
        guard head.method == .POST || head.method == .PUT || head.method == .PATCH else { return .discard }
        let key: String
        if query.path.hasPrefix("/admin/v1/") {
            key = relay.configuration.auth.adminKey
        } else if query.path.hasPrefix("/api/v1/") {
            key = relay.configuration.auth.apiKey
        } else {
            return .discard
        }
        guard let token = BearerToken.from(head.headers), ConstantTime.equals(token, key) else { return .discard }
        return .read(limit: relay.configuration.listener.maxHTTPBodyBytes, release: nil)
    }

    /// Answers a request; store lookups complete later on `eventLoop`.
    func route(_ request: HTTPRequest, on eventLoop: any EventLoop) -> EventLoopFuture<HTTPResponse> {
        let query = QueryString(uri: request.head.uri)
        if query.path.hasPrefix("/admin/v1/") {
            guard authorized(request, key: relay.configuration.auth.adminKey) else { return eventLoop.makeSucceededFuture(unauthorized()) }
            return AdminAPI(relay: relay).handle(request, query: query, on: eventLoop)
        }
        if query.path == "/socket.io/" || query.path == "/socket.io", query["EIO"] == "4", query["transport"] == "polling" {
            return PollingEndpoint(relay: relay).handle(request, query: query, on: eventLoop)
        }
        if let user = PresenceEndpoint.userSegment(of: query.path) {
            guard request.method == .GET else { return eventLoop.makeSucceededFuture(.error(.methodNotAllowed, code: "method_not_allowed", message: "use GET")) }
            guard authorized(request, key: relay.configuration.auth.apiKey) else { return eventLoop.makeSucceededFuture(unauthorized()) }
            return PresenceEndpoint(presence: relay.hub.presence).user(segment: user, on: eventLoop)
        }
        switch (request.method, query.path) {
        case (.POST, "/api/v1/emit"):
            // Answered once the cluster's recipients are counted (a Redis round trip).
            guard authorized(request, key: relay.configuration.auth.apiKey) else { return eventLoop.makeSucceededFuture(unauthorized()) }
            return EmitEndpoint(hub: relay.hub).handle(request.body, on: eventLoop)
        case (.POST, "/api/v1/presence"):
            guard authorized(request, key: relay.configuration.auth.apiKey) else { return eventLoop.makeSucceededFuture(unauthorized()) }
            return PresenceEndpoint(presence: relay.hub.presence).batch(request.body, on: eventLoop)
        case (.GET, "/api/v1/receipts"):
            guard authorized(request, key: relay.configuration.auth.apiKey) else { return eventLoop.makeSucceededFuture(unauthorized()) }
            return ReceiptsEndpoint(store: relay.receipts).handle(query: query, on: eventLoop)
        case (.GET, "/readyz"):
            return AdminAPI(relay: relay).readiness(on: eventLoop, detailed: false)
        default:
            return eventLoop.makeSucceededFuture(route(request))
        }
    }

    func route(_ request: HTTPRequest) -> HTTPResponse {
        let query = QueryString(uri: request.head.uri)
        if let user = UserDisconnectEndpoint.user(inPath: query.path) {
            guard authorized(request, key: relay.configuration.auth.apiKey) else { return unauthorized() }
            guard request.method == .POST else { return .error(.methodNotAllowed, code: "method_not_allowed", message: "use POST") }
            return UserDisconnectEndpoint(revocations: relay.hub.revocations).handle(user: user, body: request.body)
        }
        switch (request.method, query.path) {
        case (_, "/socket.io/"), (_, "/socket.io"):
            return refuseEngineIO(request, query: query)
        case (_, "/api/v1/emit"), (_, "/api/v1/presence"):
            return .error(.methodNotAllowed, code: "method_not_allowed", message: "use POST")
        case (.GET, "/healthz"):
            return .json(.ok, .object([("status", "ok")]))
        case (.GET, "/metrics"):
            if let key = relay.configuration.auth.metricsKey, !authorized(request, key: key) { return unauthorized() }
            return HTTPResponse(status: .ok, contentType: "text/plain; version=0.0.4; charset=utf-8", body: Array(MetricsEndpoint(relay: relay).render().utf8))
        case (.GET, "/dashboard"), (.GET, "/dashboard/"):
            var r = HTTPResponse(status: .ok, contentType: "text/html; charset=utf-8", body: Array(Dashboard.html.utf8))
            r.extraHeaders.append(("content-security-policy", "default-src 'self'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; img-src 'self' data:"))
            r.extraHeaders.append(("x-frame-options", "DENY"))
            return r
        default:
            return .error(.notFound, code: "not_found", message: "no such endpoint")
        }
    }

    /// Why a `/socket.io/` request did not become a WebSocket.
    private func refuseEngineIO(_ request: HTTPRequest, query: QueryString) -> HTTPResponse {
        let origin = request.head.headers.first(name: "origin")
        if let origin, !relay.configuration.listener.originPolicy.allows(origin: origin, host: request.head.headers.first(name: "host")) {
            return .error(.forbidden, code: "origin_not_allowed", message: "origin \(origin) is not allowed")
        }
        if let problem = UpgradeRequestRules.problem(request.head) {
            return .error(.badRequest, code: "bad_upgrade_request", message: problem)
        }
        if query["EIO"] != "4" {
            return .error(.badRequest, code: "unsupported_protocol_version", message: "only Engine.IO v4 (EIO=4) is served")
        }
        if query["transport"] != "websocket" {
            return .error(.badRequest, code: "transport_unsupported", message: "transport must be polling or websocket")
        }
        if let sid = query["sid"], relay.pollingSessions.lookup(sid) == nil {
            return PollingEndpoint.engineError(.sessionUnknown)
        }
        if !request.admitted {
            return .error(.serviceUnavailable, code: "too_many_connections", message: "connection limit reached")
        }
        if query["sid"] == nil, UpgradeRequestRules.asksForWebSocket(request.head) {
            // Every other reason is checked above: the upgrader declined the new session because
            // too many CONNECTs were pending (`PendingConnects.isFull`) when it looked.
            relay.admission.pending.countShed()
            return PendingConnects.busyResponse()
        }
        return .error(.badRequest, code: "upgrade_required", message: "send a WebSocket upgrade request")
    }

    private func authorized(_ request: HTTPRequest, key: String) -> Bool {
        guard let token = BearerToken.from(request.head.headers) else { return false }
        return ConstantTime.equals(token, key)
    }

    private func unauthorized() -> HTTPResponse {
        var r = HTTPResponse.error(.unauthorized, code: "unauthorized", message: "missing or wrong bearer key")
        r.extraHeaders.append(("www-authenticate", "Bearer"))
        return r
    }
}

/// Compares secrets without an early exit, so timing does not leak how much matched.
enum ConstantTime {
    static func equals(_ a: String, _ b: String) -> Bool {
        let x = Array(a.utf8), y = Array(b.utf8)
        var diff = UInt8(x.count == y.count ? 0 : 1)
        for i in 0..<max(x.count, y.count) {
            diff |= (i < x.count ? x[i] : 0) ^ (i < y.count ? y[i] : 0)
        }
        return diff == 0
    }
}
