/// What a client asks for in its CONNECT auth (`40{…}`): its token, whether it wants offsets
/// and a `pid` (connection state recovery), the session it comes back to, and rooms to be in
/// before the answer.
public struct ConnectRequest: Sendable, Equatable {
    public var token: String
    /// The client opted in to offsets: `recover: true`, or a `pid` (a reconnecting
    /// socket.io-client that got one before).
    public var wantsRecovery: Bool
    /// The private id of the session the client comes back to.
    public var pid: String?
    /// The last offset the client received (`nil`: none).
    public var offset: WireOffset?
    /// The client named an offset that is not one (malformed, not a string): such a session is
    /// never recovered — "no offset" would replay what it already has.
    public var offsetIsInvalid = false
    /// Rooms to join before the CONNECT answer.
    public var rooms: [String]
    /// Rooms named in the CONNECT past the socket's join budget: refused `rate_limited` in the
    /// answer (the session moves them here from `rooms`).
    public var overBudget: [String] = []

    public init(token: String, wantsRecovery: Bool = false, pid: String? = nil, offset: WireOffset? = nil, rooms: [String] = []) {
        self.token = token
        self.wantsRecovery = wantsRecovery
        self.pid = pid
        self.offset = offset
        self.rooms = rooms
    }

    /// Reads the CONNECT data; `fallbackToken` is a token offered outside it (query string,
    /// `Authorization`).
    ///
    /// - Throws: `invalid_payload` when `rooms` is not an array of valid room names,
    ///   `too_many_rooms` when it names more than `maxRooms`.
    public init(data: JSONValue?, fallbackToken: String?, maxRooms: Int) throws(RelayError) {
        token = data?["token"]?.stringValue ?? fallbackToken ?? ""
        // A pid is 22 base64url characters; anything longer is no session of ours.
        if let pid = data?["pid"]?.stringValue, pid.utf8.count <= 64, !pid.isEmpty {
            self.pid = pid
        }
        wantsRecovery = data?["recover"]?.boolValue == true || pid != nil
        switch data?["offset"] {
        case nil, .null?: offset = nil
        case .string(let text)?:
            offset = WireOffset(text)
            offsetIsInvalid = offset == nil
        default: offsetIsInvalid = true
        }
        rooms = []
        switch data?["rooms"] {
        case nil, .null?:
            break
        case .array(let items)?:
            guard items.count <= maxRooms else { throw RelayError(.tooManyRooms, "at most \(maxRooms) rooms per connection") }
            for item in items {
                guard let room = item.stringValue, EventValidator.isValidRoomName(room) else {
                    throw RelayError(.invalidPayload, "rooms must be an array of room names")
                }
                if !rooms.contains(room) { rooms.append(room) }
            }
        default:
            throw RelayError(.invalidPayload, "rooms must be an array of room names")
        }
    }
}
