import NIOConcurrencyHelpers
import RelayCore

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
    private let state: NIOLockedValueBox<State>

    public init(maxConnections: Int, maxPerIP: Int, authFailures: EventRateLimiter.Budget) {
        self.maxConnections = maxConnections
        self.maxPerIP = maxPerIP
        self.state = NIOLockedValueBox(State(authFailures: KeyedRateLimiter(budget: authFailures)))
    }

    /// Counts a new TCP connection; `false` if it is over a limit (it is counted anyway and
    /// must still be released when it closes).
    public func open(ip: String) -> Bool {
        state.withLockedValue { s in
            s.total += 1
            let n = (s.perIP[ip] ?? 0) + 1
            s.perIP[ip] = n
            return s.total <= maxConnections && n <= maxPerIP
        }
    }

    public func close(ip: String) {
        state.withLockedValue { s in
            s.total -= 1
            let n = (s.perIP[ip] ?? 1) - 1
            s.perIP[ip] = n <= 0 ? nil : n
        }
    }

    public var openConnections: Int { state.withLockedValue { $0.total } }

    /// Whether `ip` may try to authenticate now.
    public func mayAuthenticate(ip: String, now: Int64) -> Bool {
        state.withLockedValue { $0.authFailures.isAllowed(ip, now: now) }
    }

    public func recordAuthFailure(ip: String, now: Int64) {
        state.withLockedValue { _ = $0.authFailures.record(ip, now: now) }
    }
}
