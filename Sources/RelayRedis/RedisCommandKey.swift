/// Which key a command is routed by in a Redis Cluster (its first key, as `COMMAND GETKEYS`
/// would say for the commands Relay sends); nil for commands any node answers.
enum RedisCommandKey {
    private static let keyless: Set<String> = [
        "PING", "INFO", "CLUSTER", "COMMAND", "HELLO", "AUTH", "SELECT", "SENTINEL", "ROLE", "WAIT",
        "TIME", "DBSIZE", "CONFIG", "CLIENT", "ECHO", "ASKING", "READONLY", "SCRIPT", "FLUSHALL",
    ]

    static func key(of args: [String]) -> String? {
        guard let name = args.first?.uppercased(), !keyless.contains(name) else { return nil }
        switch name {
        case "EVAL", "EVALSHA", "EVAL_RO", "EVALSHA_RO", "FCALL", "FCALL_RO":
            guard args.count > 3, let n = Int(args[2]), n > 0 else { return nil }
            return args[3]
        case "XINFO", "OBJECT", "MEMORY":
            return args.count > 2 ? args[2] : nil
        default:
            return args.count > 1 ? args[1] : nil
        }
    }

    static func slot(of args: [String]) -> Int? {
        key(of: args).map { RedisHashSlot.slot(of: $0) }
    }
}
