/// Where Redis is: `redis://[:password@]host:port[/db]`.
public struct RedisEndpoint: Sendable, Equatable {
    public var host: String
    public var port: Int
    public var password: String?
    public var database: Int

    public init?(url: String) {
        guard url.hasPrefix("redis://") else { return nil }
        var rest = Substring(url.dropFirst("redis://".count))
        var password: String?
        if let at = rest.lastIndex(of: "@") {
            let auth = rest[..<at]
            password = auth.hasPrefix(":") ? String(auth.dropFirst()) : (auth.split(separator: ":", maxSplits: 1).last.map(String.init))
            rest = rest[rest.index(after: at)...]
        }
        var database = 0
        if let slash = rest.firstIndex(of: "/") {
            let db = rest[rest.index(after: slash)...]
            if !db.isEmpty {
                guard let d = Int(db), d >= 0 else { return nil }
                database = d
            }
            rest = rest[..<slash]
        }
        var host = String(rest)
        var port = 6379
        if let colon = rest.lastIndex(of: ":") {
            guard let p = Int(rest[rest.index(after: colon)...]), (1...65535).contains(p) else { return nil }
            port = p
            host = String(rest[..<colon])
        }
        guard !host.isEmpty else { return nil }
        self.host = host
        self.port = port
        self.password = password
        self.database = database
    }
}
