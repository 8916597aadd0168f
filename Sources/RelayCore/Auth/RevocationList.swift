/// Users whose tokens issued before a time are no longer accepted (a backend's logout, ban or
/// password change), each kept for a time-to-live that outlasts the tokens it refuses; bounded.
public struct RevocationList: Sendable, Equatable {
    struct Entry: Sendable, Equatable {
        /// Tokens issued (`iat`) before this second are refused.
        var cutoff: Int64
        /// The entry is dropped after this second.
        var until: Int64
    }

    public let ttlSeconds: Int64
    public let maxEntries: Int
    private var entries: [String: Entry] = [:]

    public init(ttlSeconds: Int64, maxEntries: Int = 100_000) {
        self.ttlSeconds = max(1, ttlSeconds)
        self.maxEntries = max(1, maxEntries)
    }

    public var count: Int { entries.count }

    /// Refuses `user`'s tokens issued before `cutoff` (seconds since 1970), from `now` on.
    public mutating func revoke(_ user: String, issuedBefore cutoff: Int64, now: Int64) {
        if entries[user] == nil, entries.count >= maxEntries {
            entries = entries.filter { $0.value.until > now }
            // Still full: the entry that expires first goes (it protects the least).
            if entries.count >= maxEntries, let first = entries.min(by: { $0.value.until < $1.value.until })?.key {
                entries.removeValue(forKey: first)
            }
        }
        let until = cutoff > Int64.max - ttlSeconds ? Int64.max : cutoff + ttlSeconds
        let old = entries[user]
        entries[user] = Entry(cutoff: max(cutoff, old?.cutoff ?? .min), until: max(until, old?.until ?? .min))
    }

    /// Whether a token of `user` issued at `issuedAt` is refused at `now`. A token without `iat`
    /// is refused while a revocation stands: it cannot prove it is newer.
    public func isRevoked(_ user: String, issuedAt: Int64?, now: Int64) -> Bool {
        guard let entry = entries[user], entry.until > now else { return false }
        guard let issuedAt else { return true }
        return issuedAt < entry.cutoff
    }

    /// The standing revocations (user, cutoff), for the cluster store.
    public func standing(now: Int64) -> [(user: String, cutoff: Int64)] {
        entries.filter { $0.value.until > now }.map { ($0.key, $0.value.cutoff) }.sorted { $0.user < $1.user }
    }
}
