import Logging
import RelayRedis

extension RESPValue {
    /// The key-value pairs of a RESP3 map or of a RESP2 flat array of alternating keys and
    /// values (a trailing odd element is dropped).
    package var pairs: [(RESPValue, RESPValue)] {
        if case .map(let pairs) = self { return pairs }
        guard let flat = elements else { return [] }
        var out: [(RESPValue, RESPValue)] = []
        out.reserveCapacity(flat.count / 2)
        var i = 0
        while i + 1 < flat.count {
            out.append((flat[i], flat[i + 1]))
            i += 2
        }
        return out
    }
}

/// Logging of Redis's refusals.
package enum RedisRefusal {
    /// Logs a Redis error reply (a refused command, e.g. CROSSSLOT); not a link that is down.
    package static func log(_ logger: Logger, _ error: any Error, _ what: String) {
        if case RESPError.server(let message) = error {
            logger.warning("redis refused a command", metadata: ["what": "\(what)", "error": "\(message)"])
        }
    }
}
