/// A disconnected socket kept for connection state recovery: who it was, its rooms and its
/// position in each of its streams. Kept in memory, or as JSON in Redis so that another node
/// can recover it.
public struct KeptSession: Sendable, Equatable {
    public var pid: String
    public var socketSID: String
    public var userID: String
    public var rooms: [String]
    public var log: RecoveryLog
    /// When the transport dropped (wall ms).
    public var disconnectedAtMs: Int64

    public init(pid: String, socketSID: String, userID: String, rooms: [String], log: RecoveryLog, disconnectedAtMs: Int64) {
        self.pid = pid
        self.socketSID = socketSID
        self.userID = userID
        self.rooms = rooms
        self.log = log
        self.disconnectedAtMs = disconnectedAtMs
    }

    public var json: JSONValue {
        .object([
            ("p", .string(pid)), ("s", .string(socketSID)), ("u", .string(userID)),
            ("r", .array(rooms.map { .string($0) })),
            ("b", .object(log.base.map { ($0.key.name, .string($0.value.description)) }.sorted { $0.0 < $1.0 })),
            ("n", .array(log.runs.map { .array([.string($0.stream.name), .string($0.first.description), .string($0.last.description)]) })),
            ("f", .bool(log.folded)), ("m", .int(Int64(log.maxRuns))), ("t", .int(disconnectedAtMs)),
        ])
    }

    /// Reads a record written by `json`; `nil` when anything is missing or malformed.
    public init?(json: JSONValue) {
        guard let pid = json["p"]?.stringValue, let sid = json["s"]?.stringValue, let user = json["u"]?.stringValue,
            case .array(let rooms)? = json["r"], case .object(let base)? = json["b"], case .array(let runs)? = json["n"],
            let folded = json["f"]?.boolValue, let maxRuns = json["m"]?.intValue, maxRuns > 0, maxRuns <= 4096,
            let at = json["t"]?.intValue
        else { return nil }
        var baseMap: [StreamKey: StreamOffset] = [:]
        for (name, value) in base {
            guard let key = StreamKey(name: name), let offset = value.stringValue.flatMap({ StreamOffset(id: $0) }) else { return nil }
            baseMap[key] = offset
        }
        var runList: [RecoveryLog.Run] = []
        for run in runs {
            guard case .array(let parts) = run, parts.count == 3, let key = parts[0].stringValue.flatMap({ StreamKey(name: $0) }),
                let first = parts[1].stringValue.flatMap({ StreamOffset(id: $0) }), let last = parts[2].stringValue.flatMap({ StreamOffset(id: $0) })
            else { return nil }
            runList.append(RecoveryLog.Run(stream: key, first: first, last: last))
        }
        self.pid = pid
        self.socketSID = sid
        self.userID = user
        self.rooms = rooms.compactMap(\.stringValue)
        self.log = RecoveryLog(maxRuns: Int(maxRuns), base: baseMap, runs: runList, folded: folded)
        self.disconnectedAtMs = at
    }
}
