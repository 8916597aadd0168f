import Atomics
import CoreMetrics

/// The CONNECTs being set up on this node (the token verified, the rooms joined, a session
/// recovered): the queue a storm of reconnects builds (a deploy, a crashed node, a network
/// coming back). Past `limit`, a new Engine.IO session is refused at its handshake — HTTP 503
/// with `Retry-After`, code `server_busy`, before any token or room work — instead of queueing
/// behind the others: the stock clients' own backoff (socket.io-client: 1 s doubling to 5 s,
/// ±50 %) spreads the refused ones out, and a CONNECT that was let in waits no longer than the
/// queue takes to drain. Sessions already open (polling `GET`s and upgrades with a `sid`, a
/// CONNECT after `41`) are never refused for it.
///
/// A session counts from the moment its `40` arrives until the CONNECT is answered or refused,
/// or the session closes (`ClientSession`). Sessions that have not sent a `40` do not count:
/// they cost nothing yet, and a client holding many of them open (bounded by the per-IP limit
/// and `connect-timeout`) must not be able to lock everybody else out. The count is read
/// without a lock: a few over `limit` in a race is a soft limit, not a fault.
public final class PendingConnects: Sendable {
    /// 0: no limit.
    public let limit: Int
    private let count = ManagedAtomic<Int>(0)
    private let gauge: Meter?
    private let shed: Counter?

    init(limit: Int, metrics: ConnectionMetrics? = nil) {
        self.limit = limit
        self.gauge = metrics?.pendingConnects
        self.shed = metrics?.handshakesShed
    }

    /// CONNECTs being set up now.
    public var current: Int { count.load(ordering: .relaxed) }

    /// A new session would be over the limit.
    var isFull: Bool { limit > 0 && count.load(ordering: .relaxed) >= limit }

    /// A new session would be over the limit: refuse its handshake (and count the refusal).
    func refusesNewSession() -> Bool {
        guard isFull else { return false }
        countShed()
        return true
    }

    /// A handshake refused because the limit was reached (`isFull` when it was decided).
    func countShed() { shed?.increment() }

    /// The answer to a refused handshake: 503, `server_busy`, and when to try again.
    static func busyResponse() -> HTTPResponse {
        var response = HTTPResponse.error(.serviceUnavailable, code: "server_busy", message: "too many connections are being set up; retry in a moment")
        response.extraHeaders.append(("retry-after", "1"))
        return response
    }

    /// A CONNECT arrived: it counts until `ended`.
    func began() {
        count.wrappingIncrement(ordering: .relaxed)
        gauge?.increment()
    }

    /// The CONNECT was answered or refused, or its session closed first.
    func ended() {
        count.wrappingDecrement(ordering: .relaxed)
        gauge?.decrement()
    }
}
