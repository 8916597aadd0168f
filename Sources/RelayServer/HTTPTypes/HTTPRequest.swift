import NIOHTTP1

/// A complete HTTP request as the router sees it.
struct HTTPRequest {
    var head: HTTPRequestHead
    var body: [UInt8]
    var remoteIP: String
    /// The connection is within the connection limits.
    var admitted: Bool

    var method: HTTPMethod { head.method }
}
