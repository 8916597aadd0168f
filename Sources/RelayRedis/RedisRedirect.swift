/// A cluster's redirection of a command: `MOVED <slot> <host>:<port>` (the slot lives there now)
/// or `ASK <slot> <host>:<port>` (this once, during a migration, after `ASKING`).
enum RedisRedirect: Equatable {
    case moved(slot: Int, to: RedisEndpoint.Address)
    case ask(slot: Int, to: RedisEndpoint.Address)

    init?(error message: String) {
        let parts = message.split(separator: " ")
        guard parts.count == 3, let slot = Int(parts[1]), (0..<RedisHashSlot.count).contains(slot),
            let address = RedisEndpoint.Address(parts[2], defaultPort: 6379)
        else { return nil }
        switch parts[0] {
        case "MOVED": self = .moved(slot: slot, to: address)
        case "ASK": self = .ask(slot: slot, to: address)
        default: return nil
        }
    }

    /// Errors after which the same command is tried again shortly: the cluster is failing over
    /// or migrating (`TRYAGAIN`, `CLUSTERDOWN`), or this master was demoted (`READONLY`,
    /// `MASTERDOWN`, `LOADING`).
    static func isTransient(_ message: String) -> Bool {
        for prefix in ["TRYAGAIN", "CLUSTERDOWN", "READONLY", "MASTERDOWN", "LOADING"] where message.hasPrefix(prefix) { return true }
        return false
    }
}
