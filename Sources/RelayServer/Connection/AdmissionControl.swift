import NIOConcurrencyHelpers
import RelayBackends
import RelayCore
import RelayLocks

/// Counts open TCP connections, in total and per client IP, and rate-limits failed
/// authentications per IP. Touched once per connect/disconnect, never per event.
public final class AdmissionControl: Sendable {
    private struct State {
        var total = 0
        var perIP: [String: Int] = [:]
        var authFailures: KeyedRateLimiter
    }

    public let maxConnections: Int
    public let maxPerIP: Int
    private let state: AuditedLock<State>

    public init(maxConnections: Int, maxPerIP: Int, authFailures: EventRateLimiter.Budget) {
        self.maxConnections = maxConnections
        self.maxPerIP = maxPerIP
        self.state = AuditedLock(State(authFailures: KeyedRateLimiter(budget: authFailures)))
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

    /// Whether `ip` may try to authenticate now.
    public func mayAuthenticate(ip: String, now: Int64) -> Bool {
        state.withLockedValue { $0.authFailures.isAllowed(ip, now: now) }
    }

    public func recordAuthFailure(ip: String, now: Int64) {
        state.withLockedValue { _ = $0.authFailures.record(ip, now: now) }
    }
}
