import AsyncHTTPClient
import Crypto
import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1
import NIOPosix
import RelayBackends
import RelayCore
import RelayLocks

/// Sends webhook events to every configured URL: one bounded `WebhookQueue` per URL (batches,
/// retries with backoff and jitter, one batch in flight, order kept), requests signed with
/// HMAC-SHA256, on AsyncHTTPClient and an event loop of its own — never a socket's loop.
///
/// `enqueue` is what the hub calls: it takes one lock, appends to each URL's queue (or counts a
/// drop) and at most schedules a timer. No I/O, no waiting.
final class WebhookDispatcher: Sendable {
    private struct Target: Sendable {
        var url: String
        /// The URL without credentials, for logs.
        var logURL: String
        var queue: WebhookQueue<WebhookEvent>
    }

    private struct State: Sendable {
        var targets: [Target]
        /// When the pump is next scheduled to run (monotonic ms), if it is.
        var scheduledAt: Int64?
        var nextEventID: UInt64 = 0
        /// Drops since the last drop log line, and when that was (monotonic ms).
        var unloggedDrops = 0
        var lastDropLogAt: Int64?
        /// Shutting down: send what is waiting without waiting for the flush time.
        var flushAll = false
        var stopped = false
    }

    let settings: WebhookSettings
    let nodeID: String
    private let idPrefix: String
    private let key: SymmetricKey
    private let state: AuditedLock<State>
    private let loop: any EventLoop
    private let client: HTTPClient
    private let clock: RelayClock
    private let metrics: WebhookMetrics
    private let logger: Logger
    /// Drop log lines at most this often.
    static let dropLogIntervalMs: Int64 = 10_000

    init(settings: WebhookSettings, nodeID: String, clock: RelayClock, registry: PrometheusRegistry, logger: Logger,
         group: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton) {
        self.settings = settings
        self.nodeID = nodeID
        // Event and batch ids: unique per process (random prefix), increasing within it.
        self.idPrefix = TokenIssuer.randomSecret(bytes: 6)
        self.key = SymmetricKey(data: Array(settings.secret.utf8))
        self.loop = group.next()
        var config = HTTPClient.Configuration()
        config.redirectConfiguration = .disallow
        config.timeout = .init(connect: .milliseconds(min(settings.timeoutMs, 5_000)), read: .milliseconds(settings.timeoutMs))
        self.client = HTTPClient(eventLoopGroup: group, configuration: config)
        self.clock = clock
        self.metrics = WebhookMetrics(registry: registry)
        self.logger = logger
        let options = settings.queueOptions
        self.state = AuditedLock(State(targets: settings.urls.map { Target(url: $0, logURL: Self.redacted($0), queue: WebhookQueue(options: options)) }))
    }

    deinit {
        // A dispatcher dropped without `shutdown` (startup failed, tests) still closes its client;
        // the client stays alive until that completes. After `shutdown` this is a no-op.
        client.shutdown().whenComplete { _ in }
    }

    /// `scheme://host/path` without `user:password@`.
    static func redacted(_ url: String) -> String {
        guard let scheme = url.range(of: "://") else { return url }
        let rest = url[scheme.upperBound...]
        let authorityEnd = rest.firstIndex(of: "/") ?? rest.endIndex
        guard let at = rest[..<authorityEnd].lastIndex(of: "@") else { return url }
        return String(url[..<scheme.upperBound]) + String(rest[rest.index(after: at)...])
    }

    // MARK: Enqueueing (any thread)

    /// Adds an event (made with its id) to every URL's queue. O(URLs), no I/O.
    func enqueue(_ make: (String) -> WebhookEvent) {
        let now = clock.monotonicMs()
        let (wake, dropped, depth, logDrops) = state.withLockedValue { s -> (Int64?, Int, Int, Int) in
            guard !s.stopped else { return (nil, s.targets.count, 0, 0) }
            s.nextEventID += 1
            let event = make("\(idPrefix)-\(s.nextEventID)")
            let bytes = event.approximateBytes
            var dropped = 0
            for i in s.targets.indices where !s.targets[i].queue.enqueue(event, bytes: bytes, now: now) { dropped += 1 }
            var logDrops = 0
            if dropped > 0 {
                s.unloggedDrops += dropped
                if s.lastDropLogAt.map({ now - $0 >= Self.dropLogIntervalMs }) ?? true {
                    logDrops = s.unloggedDrops
                    s.unloggedDrops = 0
                    s.lastDropLogAt = now
                }
            }
            return (Self.armTimer(&s, now: now), dropped, Self.depth(s), logDrops)
        }
        if dropped > 0 { metrics.droppedQueueFull.increment(by: Int64(dropped)) }
        metrics.queueDepth.set(depth)
        if logDrops > 0 {
            logger.warning("webhook queue full: events dropped", metadata: ["dropped": "\(logDrops)", "queue-size": "\(settings.queueSize)"])
        }
        if let wake { schedule(at: wake, now: now) }
    }

    private static func depth(_ s: State) -> Int { s.targets.reduce(0) { $0 + $1.queue.depth } }

    /// The earliest time a queue wants the pump, if that is sooner than the pump already
    /// scheduled (and then records it).
    private static func armTimer(_ s: inout State, now: Int64) -> Int64? {
        guard let due = s.targets.compactMap({ $0.queue.nextDue(now: now) }).min() else { return nil }
        if let at = s.scheduledAt, at <= due { return nil }
        s.scheduledAt = due
        return due
    }

    private func schedule(at: Int64, now: Int64) {
        let delay = max(0, at - now)
        if delay == 0 {
            loop.execute { self.pump(scheduledFor: at) }
        } else {
            loop.scheduleTask(in: .milliseconds(delay)) { self.pump(scheduledFor: at) }
        }
    }

    // MARK: Sending (on `loop`)

    /// Runs what is due. `scheduledFor`: the time this run was scheduled for; when it is the
    /// recorded timer, that timer is gone (so the next one can be armed).
    private func pump(scheduledFor: Int64) {
        let now = clock.monotonicMs()
        let (sends, wake) = state.withLockedValue { s -> ([(Int, WebhookQueue<WebhookEvent>.Batch)], Int64?) in
            if s.scheduledAt == scheduledFor { s.scheduledAt = nil }
            guard !s.stopped else { return ([], nil) }
            var sends: [(Int, WebhookQueue<WebhookEvent>.Batch)] = []
            for i in s.targets.indices {
                if case .send(let batch) = s.targets[i].queue.poll(now: now, flushAll: s.flushAll) { sends.append((i, batch)) }
            }
            return (sends, Self.armTimer(&s, now: now))
        }
        for (i, batch) in sends { send(batch, to: i) }
        if let wake { schedule(at: wake, now: now) }
    }

    /// The id of a batch: the same on every attempt.
    func batchID(target: Int, sequence: UInt64) -> String { "\(idPrefix)-b\(target)-\(sequence)" }

    /// The signed request's headers for `body` at `timestamp` (unix seconds).
    static func headers(body: [UInt8], timestamp: Int64, key: SymmetricKey, batchID: String, attempt: Int) -> HTTPHeaders {
        let mac = HMAC<SHA256>.authenticationCode(for: WebhookSignature.signedBytes(timestamp: timestamp, body: body), using: key)
        var headers = HTTPHeaders()
        headers.add(name: "Content-Type", value: "application/json")
        headers.add(name: "User-Agent", value: "relay/\(RelayVersion.string)")
        headers.add(name: WebhookSignature.header, value: WebhookSignature.headerValue(timestamp: timestamp, mac: Array(mac)))
        headers.add(name: WebhookSignature.deliveryHeader, value: batchID)
        headers.add(name: WebhookSignature.attemptHeader, value: String(attempt))
        return headers
    }

    private func send(_ batch: WebhookQueue<WebhookEvent>.Batch, to target: Int) {
        guard let endpoint = state.withLockedValue({ s in s.targets.indices.contains(target) ? (url: s.targets[target].url, log: s.targets[target].logURL) : nil }) else { return }
        let url = endpoint.url, logURL = endpoint.log
        let id = batchID(target: target, sequence: batch.sequence)
        let body = WebhookEvent.body(batchID: id, node: nodeID, events: batch.events)
        let headers = Self.headers(body: body, timestamp: clock.wallMs() / 1000, key: key, batchID: id, attempt: batch.attempt)
        let request: HTTPClient.Request
        do {
            request = try HTTPClient.Request(url: url, method: .POST, headers: headers, body: .bytes(body))
        } catch {
            finished(target: target, success: false, problem: "invalid request: \(error)", logURL: logURL, batchID: id)
            return
        }
        client.execute(request: request, deadline: .now() + .milliseconds(settings.timeoutMs)).whenComplete { result in
            switch result {
            case .success(let response) where (200..<300).contains(response.status.code):
                self.finished(target: target, success: true, problem: nil, logURL: logURL, batchID: id)
            case .success(let response):
                self.finished(target: target, success: false, problem: "HTTP \(response.status.code)", logURL: logURL, batchID: id)
            case .failure(let error):
                self.finished(target: target, success: false, problem: "\(error)", logURL: logURL, batchID: id)
            }
        }
    }

    private func finished(target: Int, success: Bool, problem: String?, logURL: String, batchID: String) {
        let now = clock.monotonicMs()
        let random = Double.random(in: 0..<1)
        let (outcome, wake, depth) = state.withLockedValue { s -> (WebhookQueue<WebhookEvent>.Outcome?, Int64?, Int) in
            guard s.targets.indices.contains(target) else { return (nil, nil, 0) }
            let outcome = s.targets[target].queue.finished(success: success, now: now, random: random)
            return (outcome, Self.armTimer(&s, now: now), Self.depth(s))
        }
        metrics.queueDepth.set(depth)
        switch outcome {
        case .delivered(let events, let latencyMs)?:
            metrics.deliveries.increment()
            metrics.eventsDelivered.increment(by: Int64(events))
            metrics.batchLatency.recordMilliseconds(latencyMs)
        case .retry(let at, let attempt)?:
            metrics.retries.increment()
            logger.warning("webhook delivery failed; will retry", metadata: [
                "url": "\(logURL)", "delivery": "\(batchID)", "attempt": "\(attempt)", "retry-in-ms": "\(at - now)", "error": "\(problem ?? "")",
            ])
        case .gaveUp(let events, let attempts)?:
            metrics.droppedGaveUp.increment(by: Int64(events))
            logger.error("webhook delivery failed for good; events dropped", metadata: [
                "url": "\(logURL)", "delivery": "\(batchID)", "attempts": "\(attempts)", "events": "\(events)", "error": "\(problem ?? "")",
            ])
        case nil: break
        }
        if let wake { schedule(at: wake, now: now) }
    }

    // MARK: Shutdown

    /// Events waiting or in flight, all URLs.
    var depth: Int { state.withLockedValue { Self.depth($0) } }

    /// Sends what is waiting at once and waits (until `deadline`) for the queues to empty;
    /// then stops and closes the HTTP client.
    func shutdown(deadline: NIODeadline) async {
        let now = clock.monotonicMs()
        let wake = state.withLockedValue { s -> Int64? in
            s.flushAll = true
            s.scheduledAt = nil
            return Self.armTimer(&s, now: now)
        }
        if let wake { schedule(at: wake, now: now) }
        while depth > 0 && NIODeadline.now() < deadline {
            try? await Task.sleep(nanoseconds: 20_000_000)
        }
        let left = state.withLockedValue { s -> Int in
            s.stopped = true
            return Self.depth(s)
        }
        if left > 0 {
            metrics.droppedGaveUp.increment(by: Int64(left))
            logger.warning("webhook events not delivered before shutdown", metadata: ["events": "\(left)"])
        }
        try? await client.shutdown()
    }
}
