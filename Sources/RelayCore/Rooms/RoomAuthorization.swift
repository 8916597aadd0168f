/// The `rooms` claim of a token: room names a user may join, exact or by prefix (`conversation:*`).
public struct RoomAuthorization: Sendable, Equatable {
    public let exact: Set<String>
    public let prefixes: [String]

    public init(patterns: [String]) {
        var exact = Set<String>()
        var prefixes: [String] = []
        for p in patterns where !p.isEmpty {
            if p.hasSuffix("*") { prefixes.append(String(p.dropLast())) } else { exact.insert(p) }
        }
        self.exact = exact
        self.prefixes = prefixes
    }

    public func allows(_ room: String) -> Bool {
        if exact.contains(room) { return true }
        return prefixes.contains { room.hasPrefix($0) }
    }
}
