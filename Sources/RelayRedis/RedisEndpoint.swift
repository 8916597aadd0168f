/// Where Redis is, from `--redis`:
/// - `redis://[:password@]host:port[/db]`: one Redis, or one seed of a Redis Cluster (detected
///   with `CLUSTER SLOTS` at connect);
/// - `redis://[:password@]host:port,host:port,…`: seeds of a Redis Cluster (any one that answers
///   is enough; no `/db` in a cluster);
/// - `redis+sentinel://[:password@]host:port,host:port,…/<master>[/db]`: Redis Sentinels, asked
///   for the address of the master named `<master>` (the password is the master's).
public struct RedisEndpoint: Sendable, Equatable {
    public struct Address: Sendable, Hashable, CustomStringConvertible {
        public var host: String
        public var port: Int
        public init(host: String, port: Int) {
            self.host = host
            self.port = port
        }
        public var description: String { "\(host):\(port)" }

        /// `host:port` (the port defaults to `defaultPort`); nil when malformed.
        init?(_ text: Substring, defaultPort: Int) {
            var host = String(text)
            var port = defaultPort
            if let colon = text.lastIndex(of: ":") {
                guard let p = Int(text[text.index(after: colon)...]), (1...65535).contains(p) else { return nil }
                port = p
                host = String(text[..<colon])
            }
            guard !host.isEmpty, !host.contains("/") else { return nil }
            self.host = host
            self.port = port
        }
    }

    /// The seed nodes, or the sentinels.
    public var addresses: [Address]
    public var password: String?
    public var database: Int
    /// The master's name when `addresses` are sentinels.
    public var sentinelMaster: String?

    public var host: String { addresses.first?.host ?? "" }
    public var port: Int { addresses.first?.port ?? 6379 }
    public var isSentinel: Bool { sentinelMaster != nil }

    public init(addresses: [Address], password: String? = nil, database: Int = 0, sentinelMaster: String? = nil) {
        self.addresses = addresses
        self.password = password
        self.database = database
        self.sentinelMaster = sentinelMaster
    }

    public init?(url: String) {
        let sentinel: Bool
        var rest: Substring
        if url.hasPrefix("redis://") {
            sentinel = false
            rest = url.dropFirst("redis://".count)
        } else if url.hasPrefix("redis+sentinel://") {
            sentinel = true
            rest = url.dropFirst("redis+sentinel://".count)
        } else {
            return nil
        }
        var password: String?
        if let at = rest.lastIndex(of: "@") {
            let auth = rest[..<at]
            password = auth.hasPrefix(":") ? String(auth.dropFirst()) : (auth.split(separator: ":", maxSplits: 1).last.map(String.init))
            rest = rest[rest.index(after: at)...]
        }
        var path: [Substring] = []
        if let slash = rest.firstIndex(of: "/") {
            path = rest[rest.index(after: slash)...].split(separator: "/", omittingEmptySubsequences: false)
            rest = rest[..<slash]
        }
        var addresses: [Address] = []
        for part in rest.split(separator: ",", omittingEmptySubsequences: false) {
            guard let address = Address(part, defaultPort: sentinel ? 26379 : 6379) else { return nil }
            addresses.append(address)
        }
        guard !addresses.isEmpty, addresses.count <= 64 else { return nil }
        var database = 0
        var master: String?
        if sentinel {
            guard let name = path.first, !name.isEmpty, path.count <= 2 else { return nil }
            master = String(name)
            path.removeFirst()
        }
        if let db = path.first, !db.isEmpty {
            guard path.count == 1, let d = Int(db), (0...1_000_000).contains(d) else { return nil }
            database = d
        } else if path.count > 1 {
            return nil
        }
        // A cluster has no databases: `/db` only with one address (or sentinels).
        if !sentinel, addresses.count > 1, database != 0 { return nil }
        self.init(addresses: addresses, password: password, database: database, sentinelMaster: master)
    }
}
