import NIOCore
import RelayCore

/// A message for every node (not for a room or a user's sockets): carried on `relay:control`
/// by the Redis broker, dropped by the memory broker (there is no other node).
public enum ControlMessage: Sendable, Equatable {
    /// Close every socket of `user`; with a cutoff, refuse its tokens issued before it (s).
    case disconnectUser(user: String, revokedBefore: Int64?)
    /// A client reconnected elsewhere with this `pid`: the node holding a live connection of
    /// `user` with it hands the session over (closes it, keeps the record for recovery).
    case handOver(pid: String, user: String)

    package var json: JSONValue {
        switch self {
        case .disconnectUser(let user, let cutoff):
            var fields: [(String, JSONValue)] = [("t", "end"), ("u", .string(user))]
            if let cutoff { fields.append(("r", .int(cutoff))) }
            return .object(fields)
        case .handOver(let pid, let user):
            return .object([("t", "handover"), ("p", .string(pid)), ("u", .string(user))])
        }
    }

    /// Reads what another node sent; `nil` for anything malformed or unknown.
    package init?(json: JSONValue) {
        guard let user = json["u"]?.stringValue, Identifier.isValid(user, maxBytes: 256) else { return nil }
        switch json["t"]?.stringValue {
        case "end"?:
            let cutoff = json["r"]?.intValue
            if json["r"] != nil && cutoff == nil { return nil }
            self = .disconnectUser(user: user, revokedBefore: cutoff)
        case "handover"?:
            guard let pid = json["p"]?.stringValue, Identifier.isValid(pid, maxBytes: 64) else { return nil }
            self = .handOver(pid: pid, user: user)
        default:
            return nil
        }
    }
}
