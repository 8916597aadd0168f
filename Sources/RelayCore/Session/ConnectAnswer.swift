/// How a CONNECT went, as the server tells the session: who connected, and what goes into the
/// answer (`40{"sid",…}`).
public struct ConnectAnswer: Sendable, Equatable {
    public var user: AuthenticatedUser
    /// The socket id of a recovered session (`nil`: the session's own new one).
    public var socketSID: String?
    /// The private session id, for sockets that opted in to recovery.
    public var pid: String?
    /// Whether the session was recovered (sent to sockets that opted in).
    public var recovered: Bool
    /// Rooms the socket is in from the CONNECT (named in it, or recovered), with their offsets.
    public var rooms: [(room: String, offset: String)]
    /// Rooms named in the CONNECT that were refused, with the error code.
    public var refused: [(room: String, code: String)]

    public init(user: AuthenticatedUser, socketSID: String? = nil, pid: String? = nil, recovered: Bool = false, rooms: [(room: String, offset: String)] = [], refused: [(room: String, code: String)] = []) {
        self.user = user
        self.socketSID = socketSID
        self.pid = pid
        self.recovered = recovered
        self.rooms = rooms
        self.refused = refused
    }

    /// The CONNECT answer's data: `sid`, then `pid` and `recovered` for opted-in sockets, then
    /// `rooms` and `refused` when there are any.
    public func json(sid: String) -> JSONValue {
        var fields: [(String, JSONValue)] = [("sid", .string(sid))]
        if let pid {
            fields.append(("pid", .string(pid)))
            fields.append(("recovered", .bool(recovered)))
        }
        if !rooms.isEmpty { fields.append(("rooms", .object(rooms.map { ($0.room, .string($0.offset)) }))) }
        if !refused.isEmpty { fields.append(("refused", .object(refused.map { ($0.room, .string($0.code)) }))) }
        return .object(fields)
    }

    public static func == (a: ConnectAnswer, b: ConnectAnswer) -> Bool {
        a.user == b.user && a.socketSID == b.socketSID && a.pid == b.pid && a.recovered == b.recovered
            && a.rooms.elementsEqual(b.rooms) { $0 == $1 } && a.refused.elementsEqual(b.refused) { $0 == $1 }
    }
}
