import NIOCore
import RelayCore

/// A message for every node (not for a room or a user's sockets): carried on `relay:control`
/// by the Redis broker, dropped by the memory broker (there is no other node).
public enum ControlMessage: Sendable, Equatable {
    /// Close every socket of `user`; with a cutoff, refuse its tokens issued before it (s).
    case endSessions(user: String, revokedBefore: Int64?)

    var json: JSONValue {
        switch self {
        case .endSessions(let user, let cutoff):
            var fields: [(String, JSONValue)] = [("t", "end"), ("u", .string(user))]
            if let cutoff { fields.append(("r", .int(cutoff))) }
            return .object(fields)
        }
    }

    /// Reads what another node sent; `nil` for anything malformed or unknown.
    init?(json: JSONValue) {
        guard json["t"]?.stringValue == "end", let user = json["u"]?.stringValue, Identifier.isValid(user, maxBytes: 256) else { return nil }
        let cutoff = json["r"]?.intValue
        if json["r"] != nil && cutoff == nil { return nil }
        self = .endSessions(user: user, revokedBefore: cutoff)
    }
}
