import NIOHTTP1
import RelayCore

/// `POST /api/v1/emit`: the backend sends an event to a user's devices or to a room.
///
/// Body: `{"event":"notification:new","to":{"user":"bob"}|{"room":"conversation:1"},"data":{…}}`.
/// Answers `{"recipients":N}`, the number of sockets the event was handed to.
struct EmitEndpoint {
    let hub: Hub

    func handle(_ body: [UInt8]) -> HTTPResponse {
        let json: JSONValue
        do {
            json = try JSONParser.parse(body)
        } catch {
            return .error(.badRequest, code: "invalid_json", message: "body is not valid JSON")
        }
        guard case .string(let event)? = json["event"] else {
            return .error(.badRequest, code: "invalid_payload", message: "event (string) is required")
        }
        guard EventName.isValid(event) else {
            return .error(.badRequest, code: RelayErrorCode.invalidEventName.rawValue, message: RelayErrorCode.invalidEventName.message)
        }
        let data = json["data"] ?? .object([])
        guard data.isObject else { return .error(.badRequest, code: "invalid_payload", message: "data must be a JSON object") }
        var payload = data.setting("ts", to: .int(hub.clock.wallMs()))
        if payload["from"] == nil { payload = payload.setting("from", to: "server") }
        guard let to = json["to"], to.isObject else {
            return .error(.badRequest, code: "invalid_payload", message: "to must be {\"user\":…} or {\"room\":…}")
        }
        let recipients: Int
        // Identifiers must be NFC: look-alike spellings are refused, never matched.
        if case .string(let user)? = to["user"], Identifier.isValid(user, maxBytes: 256) {
            recipients = hub.publish(user: user, name: event, payload: payload)
        } else if case .string(let room)? = to["room"], EventValidator.isValidRoomName(room) {
            recipients = hub.publish(room: room, name: event, payload: payload)
        } else {
            return .error(.badRequest, code: "invalid_payload", message: "to must be {\"user\":…} or {\"room\":…}")
        }
        return .json(.ok, .object([("recipients", .int(Int64(recipients)))]))
    }
}
