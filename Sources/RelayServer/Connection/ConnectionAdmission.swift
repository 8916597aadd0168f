import NIOCore
import NIOHTTP1
import RelayCore

/// Who is at the other end of one TCP connection, and how it is counted by `AdmissionControl`.
///
/// The connection's address is its TCP peer, or, with `proxy-protocol`, the client that the
/// PROXY header declared. When that address is one of `trusted-proxies` (a load balancer that
/// speaks HTTP, such as nginx, or a health check), the client is named per request by
/// `X-Forwarded-For`: until the first request head arrives the connection counts only towards
/// the total; from then on it counts against the client of its latest request (a keep-alive
/// connection carrying several clients' requests moves with them; an upgraded connection stays
/// with the client of the upgrade request). Any other address is the client for the whole
/// connection, and `X-Forwarded-For` from it is ignored.
///
/// Confined to the channel's event loop.
final class ConnectionAdmission {
    // One per connection for its whole life: the flags after the address, which leaves room
    // for them (a 16-byte allocation class less than in declaration order with gaps).
    private let admission: AdmissionControl
    private let trusted: TrustedProxies
    /// The address the connection is counted against (`nil`: not counted per IP yet).
    private var key: String?
    /// The TCP peer or the PROXY-declared client; `nil` when the channel has no IP peer.
    let connectionAddress: IPAddress?
    /// `X-Forwarded-For` names the client of each request.
    private let perRequest: Bool
    /// Within the connection limits for the current client.
    private(set) var admitted: Bool
    private var released = false

    init(admission: AdmissionControl, trusted: TrustedProxies, connectionAddress: IPAddress?) {
        self.admission = admission
        self.trusted = trusted
        self.connectionAddress = connectionAddress?.unmapped
        if let address = self.connectionAddress, trusted.contains(address) {
            perRequest = true
            key = nil
            admitted = admission.open(ip: nil)
        } else {
            perRequest = false
            let ip = self.connectionAddress?.description ?? "unknown"
            key = ip
            admitted = admission.open(ip: ip)
        }
    }

    /// The channel's peer as an `IPAddress` (`nil` for non-IP sockets).
    static func peerAddress(of channel: any Channel) -> IPAddress? {
        channel.remoteAddress?.ipAddress.flatMap { IPAddress($0) }?.unmapped
    }

    /// The client's address as logs, the admin API and the auth-failure budget see it.
    var ip: String { key ?? connectionAddress?.description ?? "unknown" }

    /// Names the client of the request `head` (for a trusted proxy's connection, from its
    /// `X-Forwarded-For`), counts the connection against it and re-checks the limits.
    /// Calling it again with the same head changes nothing.
    @discardableResult
    func resolve(_ head: HTTPRequestHead) -> (ip: String, admitted: Bool) {
        guard perRequest, !released, let peer = connectionAddress else { return (ip, admitted) }
        let client = trusted.clientAddress(peer: peer, forwardedFor: head.headers["x-forwarded-for"]).description
        admitted = admission.move(from: key, to: client)
        key = client
        return (client, admitted)
    }

    /// Releases the connection's counts (once; further calls do nothing).
    func release() {
        guard !released else { return }
        released = true
        admission.close(ip: key)
        LiveObjects.connectionClosed()
    }
}
