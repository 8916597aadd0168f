/// What the admin API shows of one connection.
public struct ConnectionInfo: Sendable, Equatable {
    /// The Socket.IO `sid` (the one `DELETE /admin/v1/connections/{sid}` takes).
    public var sid: String
    public var user: String
    public var ip: String
    public var connectedAtMs: Int64
    public var deflate: Bool
    /// The event loop the socket lives on.
    public var loop: Int
}
