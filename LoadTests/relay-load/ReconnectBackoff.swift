import ArgumentParser

/// How a socket the server dropped comes back in the `chat` scenario.
enum ReconnectBackoff: String, ExpressibleByArgument, CaseIterable {
    /// After `--offline-ms`, and again after each failed try.
    case fixed
    /// socket.io-client's default reconnection (its `Manager` with `reconnectionDelay` 1000,
    /// `reconnectionDelayMax` 5000, `randomizationFactor` 0.5; the `backo2` rule): try k waits
    /// 1000 × 2^k ms, moved up or down by up to half of it at random, at most 5000 ms; the
    /// first try waits too. What stock clients on default options do after a server goes away.
    case socketio

    /// Milliseconds before try `attempt` (0 for the first), `unit` a uniform draw in [0, 1).
    func delayMs(attempt: Int, offlineMs: Double, unit: Double) -> Double {
        switch self {
        case .fixed:
            return offlineMs
        case .socketio:
            var ms = 1000 * Double(1 << min(attempt, 16))
            let deviation = (unit * 0.5 * ms).rounded(.down)
            ms = Int(unit * 10) & 1 == 0 ? ms - deviation : ms + deviation
            return min(ms, 5000).rounded(.down)
        }
    }
}
