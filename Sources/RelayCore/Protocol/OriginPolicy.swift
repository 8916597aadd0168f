/// Which `Origin`s may open a socket (cross-site WebSocket hijacking and polling CSRF
/// protection) while native clients pass by default.
///
/// Browsers always send `Origin` with the page's `http(s)` origin; native clients send none, or
/// one they build from the URL they connect to (socket.io-client-swift's Starscream sends
/// `ws(s)://host:port`). So an upgrade is admitted when:
/// - it has no `Origin`, or the allow-list contains `*` or that exact origin;
/// - its `Origin` has a `ws:`/`wss:` scheme (never sent by a browser);
/// - its `Origin` names the relay's own host (the request's `Host`), as a page served from the
///   relay's host, or a native client that puts its URL there, does — with `https` when the
///   relay itself serves TLS (`http://` on that host is another origin: a page anyone on the
///   path could have written).
/// Every other origin — a cross-site page — is refused unless allow-listed.
public struct OriginPolicy: Sendable, Equatable {
    public let allowed: [String]
    /// The relay serves TLS itself: its own host is admitted only as an `https` origin.
    public let secure: Bool

    public init(allowed: [String], secure: Bool = false) {
        self.allowed = allowed.map { $0.lowercased() }
        self.secure = secure
    }

    /// `origin` is the request's `Origin` header (nil when absent); `host` its `Host` header.
    public func allows(origin: String?, host: String?) -> Bool {
        guard let origin else { return true }
        let lowered = Self.trimmed(origin).lowercased()
        if allowed.contains("*") || allowed.contains(lowered) { return true }
        guard let (scheme, authority) = Self.split(lowered) else { return false }
        if scheme == "ws" || scheme == "wss" { return true }
        guard scheme == "https" || (scheme == "http" && !secure), let host, !authority.isEmpty else { return false }
        return Self.sameAuthority(authority, scheme: scheme, Self.trimmed(host).lowercased())
    }

    /// The CORS headers for an admitted `origin`: an origin the allow-list names gets itself
    /// back with credentials (the cookies of a sticky load balancer); one admitted only by `*`,
    /// or as the relay's own host, gets `*` without credentials, so no site can make
    /// credentialed requests merely because the relay is open to every site.
    public func corsHeaders(origin: String) -> [(String, String)] {
        if allowed.contains(Self.trimmed(origin).lowercased()) {
            return [("access-control-allow-origin", origin), ("access-control-allow-credentials", "true"), ("vary", "Origin")]
        }
        return [("access-control-allow-origin", "*")]
    }

    /// `scheme://authority` (an Origin has no path); nil for anything else, `null` included.
    static func split(_ origin: String) -> (scheme: String, authority: String)? {
        let bytes = Array(origin.utf8)
        guard let colon = bytes.firstIndex(of: UInt8(ascii: ":")), bytes[colon...].starts(with: Array("://".utf8)) else { return nil }
        let scheme = String(decoding: bytes[..<colon], as: UTF8.self)
        let authority = String(decoding: bytes[(colon + 3)...], as: UTF8.self)
        guard !scheme.isEmpty, !authority.contains("/"), !authority.contains("@") else { return nil }
        return (scheme, authority)
    }

    /// `example.com` and `example.com:443` are the same authority for https (default ports).
    static func sameAuthority(_ a: String, scheme: String, _ b: String) -> Bool {
        if a == b { return true }
        let port = scheme == "https" ? ":443" : ":80"
        return (a.hasSuffix(port) && String(a.dropLast(port.count)) == b) || (b.hasSuffix(port) && String(b.dropLast(port.count)) == a)
    }

    static func trimmed(_ s: String) -> String {
        var sub = Substring(s)
        while let f = sub.first, f == " " || f == "\t" { sub.removeFirst() }
        while let l = sub.last, l == " " || l == "\t" { sub.removeLast() }
        return String(sub)
    }
}
