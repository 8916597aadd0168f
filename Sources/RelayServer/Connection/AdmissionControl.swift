import NIOConcurrencyHelpers
import RelayBackends
import RelayCore
import RelayLocks

/// Counts open TCP connections, in total and per client IP, and rate-limits failed
/// authentications. Touched once per connect/disconnect, never per event.
///
/// Failed authentications are counted per *client* — its address and the token it offers — so
/// that a phone retrying a bad token spends only its own budget, not that of the other phones
/// behind the same NAT, whose valid tokens are still checked (#42). Many different bad tokens
/// from one address spend a budget of the address's, ten times the client's.
public final class AdmissionControl: Sendable {
    private struct State {
        var total = 0
        var perIP: [String: Int] = [:]
        /// Keyed by address and the token's hash (`clientKey`).
        var clientFailures: KeyedRateLimiter
        /// Keyed by address.
        var addressFailures: KeyedRateLimiter
    }

    /// How many times a client's failed-authentication budget one address may spend.
    public static let addressBudgetFactor = 10.0

    public let maxConnections: Int
    public let maxPerIP: Int
    /// CONNECTs being set up, and the limit past which new sessions are refused at their
    /// handshake.
    public let pending: PendingConnects
    private let state: AuditedLock<State>

    public init(maxConnections: Int, maxPerIP: Int, authFailures: EventRateLimiter.Budget, maxPendingConnects: Int = 0, metrics: ConnectionMetrics? = nil) {
        self.maxConnections = maxConnections
        self.maxPerIP = maxPerIP
        self.pending = PendingConnects(limit: maxPendingConnects, metrics: metrics)
        let address = EventRateLimiter.Budget(perSecond: authFailures.perSecond * Self.addressBudgetFactor, burst: authFailures.burst * Self.addressBudgetFactor)
        self.state = AuditedLock(State(clientFailures: KeyedRateLimiter(budget: authFailures), addressFailures: KeyedRateLimiter(budget: address)))
    }

    /// Counts a new TCP connection; `false` if it is over a limit (it is counted anyway and
    /// must still be released when it closes). `ip` is the client's address; `nil` when it is
    /// not known yet (a trusted proxy's connection, whose client is named per request by
    /// `X-Forwarded-For`): only the total is counted and checked until `move` names it.
    public func open(ip: String?) -> Bool {
        state.withLockedValue { s in
            s.total += 1
            guard let ip else { return s.total <= maxConnections }
            let n = (s.perIP[ip] ?? 0) + 1
            s.perIP[ip] = n
            return s.total <= maxConnections && n <= maxPerIP
        }
    }

    /// Counts an open connection against `new` instead of `old` (`nil`: not counted per IP
    /// yet) and tells whether it is within the limits for `new`. Moving to the same address is
    /// a no-op that re-checks the limits.
    public func move(from old: String?, to new: String) -> Bool {
        state.withLockedValue { s in
            if let old { Self.release(old, in: &s.perIP) }
            let n = (s.perIP[new] ?? 0) + 1
            s.perIP[new] = n
            return s.total <= maxConnections && n <= maxPerIP
        }
    }

    /// Releases a connection counted with `open` (and `move`); `ip` is the address it is
    /// counted against now.
    public func close(ip: String?) {
        state.withLockedValue { s in
            s.total -= 1
            if let ip { Self.release(ip, in: &s.perIP) }
        }
    }

    private static func release(_ ip: String, in perIP: inout [String: Int]) {
        let n = (perIP[ip] ?? 1) - 1
        perIP[ip] = n <= 0 ? nil : n
    }

    /// Connections counted against `ip` now.
    public func connections(ip: String) -> Int { state.withLockedValue { $0.perIP[ip] ?? 0 } }

    public var openConnections: Int { state.withLockedValue { $0.total } }

    /// Whether the client at `ip` offering `token` may have it checked now.
    public func mayAuthenticate(ip: String, token: String, now: Int64) -> Bool {
        let client = Self.clientKey(ip: ip, token: token)
        return state.withLockedValue { $0.clientFailures.isAllowed(client, now: now) && $0.addressFailures.isAllowed(ip, now: now) }
    }

    public func recordAuthFailure(ip: String, token: String, now: Int64) {
        let client = Self.clientKey(ip: ip, token: token)
        state.withLockedValue {
            _ = $0.clientFailures.record(client, now: now)
            _ = $0.addressFailures.record(ip, now: now)
        }
    }

    /// The address and the token's hash (seeded per process, so the key keeps no secret and
    /// cannot be aimed at from outside).
    private static func clientKey(ip: String, token: String) -> String {
        "\(ip) \(token.hashValue)"
    }
}
