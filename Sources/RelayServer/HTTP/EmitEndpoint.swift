import NIOCore
import NIOHTTP1
import RelayBackends
import RelayCore

/// `POST /api/v1/emit`: the backend sends an event to a user's devices, to a list of users, or
/// to a room.
///
/// Body: `{"event":"notification:new","to":{"user":"bob"}|{"users":["bob",…]}|{"room":"conversation:1"},
/// "data":{…},"recipientsByUser"?:true,"coalesce"?:{"key":"unread:bob","windowMs":500}}`.
/// Answers `{"recipients":N}`: the sockets the event goes to on every node (the cluster's count
/// from Redis; this node's, with `"degraded":true`, while Redis is down); with
/// `recipientsByUser`, also `"users":{"bob":2,…}`.
struct EmitEndpoint {
    let publisher: Publisher
    let presence: PresenceAnnouncer
    let clock: RelayClock
    /// At most this many users in `to.users`.
    static let maxUsers = 1000
    static let maxUserBytes = 256

    enum Target {
        case user(String)
        case users([String])
        case room(String)
    }

    struct Request {
        var event: String
        var payload: JSONValue
        var target: Target
        var byUser: Bool
        var window: EmitWindow?
    }

    /// A 400 answer: `invalid_json`, `invalid_payload` or `invalid_event_name`.
    struct Refusal: Error {
        var code: String
        var message: String
    }

    func handle(_ body: [UInt8], on loop: any EventLoop) -> EventLoopFuture<HTTPResponse> {
        let request: Request
        do throws(Refusal) {
            request = try parse(body)
        } catch {
            return loop.makeSucceededFuture(.error(.badRequest, code: error.code, message: error.message))
        }
        switch request.target {
        case .user(let user):
            publisher.publish(user: user, event: EventPolicyTable.backend(request.event), payload: request.payload, window: request.window)
            return answer(users: [user], byUser: request.byUser, on: loop)
        case .users(let users):
            let event = EventPolicyTable.backend(request.event)
            for user in users { publisher.publish(user: user, event: event, payload: request.payload, window: request.window) }
            return answer(users: users, byUser: request.byUser, on: loop)
        case .room(let room):
            publisher.publish(room: room, event: EventPolicyTable.backend(request.event), payload: request.payload, window: request.window)
            return presence.roomPresenceAnswer(room: room, on: loop).map { answer in
                Self.response(answer.value.map { ($0.user, $0.devices) }, byUser: request.byUser, degraded: answer.degraded)
            }
        }
    }

    /// The users' sockets on every node (this node's while Redis is down).
    private func answer(users: [String], byUser: Bool, on loop: any EventLoop) -> EventLoopFuture<HTTPResponse> {
        presence.userPresence(users, withRooms: false, on: loop).map { answer in
            Self.response(answer.value.map { ($0.user, $0.devices) }, byUser: byUser, degraded: answer.degraded)
        }
    }

    static func response(_ counts: [(String, Int)], byUser: Bool, degraded: Bool) -> HTTPResponse {
        var fields: [(String, JSONValue)] = [("recipients", .int(Int64(counts.reduce(0) { $0 + $1.1 })))]
        if byUser { fields.append(("users", .object(counts.map { ($0.0, .int(Int64($0.1))) }))) }
        if degraded { fields.append(("degraded", true)) }
        return .json(.ok, .object(fields))
    }

    func parse(_ body: [UInt8]) throws(Refusal) -> Request {
        let json: JSONValue
        do {
            json = try JSONParser.parse(body)
        } catch {
            throw Refusal(code: "invalid_json", message: "body is not valid JSON")
        }
        guard case .string(let event)? = json["event"] else { throw Self.invalid("event (string) is required") }
        guard EventName.isValid(event) else {
            throw Refusal(code: RelayErrorCode.invalidEventName.rawValue, message: RelayErrorCode.invalidEventName.message)
        }
        let data = json["data"] ?? .object([])
        guard data.isObject else { throw Self.invalid("data must be a JSON object") }
        var payload = data.setting("ts", to: .int(clock.wallMs()))
        if payload["from"] == nil { payload = payload.setting("from", to: "server") }
        let target = try Self.target(json["to"])
        var byUser = false
        if let flag = json["recipientsByUser"] {
            guard let b = flag.boolValue else { throw Self.invalid("recipientsByUser must be true or false") }
            byUser = b
        }
        return Request(event: event, payload: payload, target: target, byUser: byUser, window: try Self.window(json["coalesce"]))
    }

    private static let toMessage = "to must be exactly one of {\"user\":…}, {\"users\":[…]} or {\"room\":…}"

    static func target(_ to: JSONValue?) throws(Refusal) -> Target {
        guard let to, to.isObject else { throw invalid(toMessage) }
        let named = [to["user"], to["users"], to["room"]].compactMap { $0 }
        guard named.count == 1 else { throw invalid(toMessage) }
        // Identifiers must be NFC: look-alike spellings are refused, never matched.
        if let user = to["user"] {
            guard let user = user.stringValue, Identifier.isValid(user, maxBytes: maxUserBytes) else {
                throw invalid("to.user must be a user id (1-\(maxUserBytes) bytes, Unicode NFC)")
            }
            return .user(user)
        }
        if let room = to["room"] {
            guard let room = room.stringValue, EventValidator.isValidRoomName(room) else {
                throw invalid("to.room must be a room name (1-\(EventValidator.maxRoomLength) bytes without spaces, Unicode NFC)")
            }
            return .room(room)
        }
        guard case .array(let items)? = to["users"], items.count <= maxUsers else {
            throw invalid("to.users must be an array of at most \(maxUsers) user ids")
        }
        var seen = Set<String>()
        var users: [String] = []
        for (i, item) in items.enumerated() {
            guard let user = item.stringValue, Identifier.isValid(user, maxBytes: maxUserBytes) else {
                throw invalid("to.users[\(i)] must be a user id (1-\(maxUserBytes) bytes, Unicode NFC)")
            }
            if seen.insert(user).inserted { users.append(user) }
        }
        return .users(users)
    }

    static func window(_ value: JSONValue?) throws(Refusal) -> EmitWindow? {
        guard let value else { return nil }
        let range = EmitWindow.windowRange
        guard value.isObject, let key = value["key"]?.stringValue, Identifier.isValid(key, maxBytes: EmitWindow.maxKeyBytes),
            let window = value["windowMs"]?.intValue, range.contains(window)
        else {
            throw invalid(
                "coalesce must be {\"key\": 1-\(EmitWindow.maxKeyBytes) bytes (Unicode NFC), \"windowMs\": \(range.lowerBound)-\(range.upperBound)}")
        }
        return EmitWindow(key: key, windowMs: window)
    }

    private static func invalid(_ message: String) -> Refusal {
        Refusal(code: "invalid_payload", message: message)
    }
}

extension EmitEndpoint {
    /// Given the services it uses, from the node's hub.
    init(hub: Hub) {
        self.init(publisher: hub.publisher, presence: hub.presence, clock: hub.clock)
    }
}
