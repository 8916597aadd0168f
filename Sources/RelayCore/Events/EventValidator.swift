/// Validates client payloads and builds the payload Relay forwards.
///
/// Known events forward only their validated fields, so nothing unexpected rides along; custom
/// events forward the client's object as is. Either way `from` and `ts` are stamped last, so a
/// client cannot forge them.
public enum EventValidator {
    public static let maxRoomLength = 128
    public static let maxMessageIDLength = 128
    /// The longest `authorId` (and user id) in bytes.
    public static let maxAuthorIDLength = 256
    public static let maxEmojiBytes = 64
    public static let maxLiveShareSeconds: Int64 = 8 * 3600

    /// The `room` field of a payload, validated.
    public static func room(in payload: JSONValue) throws(RelayError) -> String {
        guard case .string(let room)? = payload["room"] else { throw RelayError(.invalidPayload, "room (string) is required") }
        guard isValidRoomName(room) else {
            throw RelayError(.invalidPayload, "room must be 1-\(maxRoomLength) bytes of printable characters without spaces, in Unicode NFC")
        }
        return room
    }

    /// A room name: a valid `Identifier` of at most `maxRoomLength` bytes with no ASCII space.
    public static func isValidRoomName(_ room: String) -> Bool {
        guard !room.utf8.contains(0x20) else { return false }
        return Identifier.isValid(room, maxBytes: maxRoomLength)
    }

    /// The non-empty string field `key`, at most `maxBytes` UTF-8 bytes.
    public static func string(_ payload: JSONValue, _ key: String, maxBytes: Int) throws(RelayError) -> String {
        guard case .string(let s)? = payload[key], !s.isEmpty, s.utf8.count <= maxBytes else {
            throw RelayError(.invalidPayload, "\(key) must be a non-empty string of at most \(maxBytes) bytes")
        }
        return s
    }

    /// The identifier field `key` (a message id, an author id): see `Identifier.isValid`.
    public static func identifier(_ payload: JSONValue, _ key: String, maxBytes: Int) throws(RelayError) -> String {
        guard case .string(let s)? = payload[key], Identifier.isValid(s, maxBytes: maxBytes) else {
            throw RelayError(
                .invalidPayload, "\(key) must be a non-empty string of at most \(maxBytes) bytes, in Unicode NFC, without control characters")
        }
        return s
    }

    static func number(_ payload: JSONValue, _ key: String, in range: ClosedRange<Double>, required: Bool) throws(RelayError) -> Double? {
        guard let value = payload[key], value != .null else {
            if required { throw RelayError(.invalidPayload, "\(key) (number) is required") }
            return nil
        }
        guard let d = value.doubleValue, range.contains(d) else {
            throw RelayError(.invalidPayload, "\(key) must be a number in \(range.lowerBound)...\(range.upperBound)")
        }
        return d
    }

    static func requiredNumber(_ payload: JSONValue, _ key: String, in range: ClosedRange<Double>) throws(RelayError) -> Double {
        guard let d = try number(payload, key, in: range, required: true) else {
            throw RelayError(.invalidPayload, "\(key) (number) is required")
        }
        return d
    }

    /// `message:reaction {room, messageId, emoji, action}`.
    public static func reaction(_ payload: JSONValue) throws(RelayError) -> JSONValue {
        let room = try room(in: payload)
        let messageID = try identifier(payload, "messageId", maxBytes: maxMessageIDLength)
        let emoji = try string(payload, "emoji", maxBytes: maxEmojiBytes)
        guard emoji.count <= 8 else { throw RelayError(.invalidPayload, "emoji must be at most 8 characters") }
        guard case .string(let action)? = payload["action"], action == "add" || action == "remove" else {
            throw RelayError(.invalidPayload, "action must be \"add\" or \"remove\"")
        }
        return .object([("room", .string(room)), ("messageId", .string(messageID)), ("emoji", .string(emoji)), ("action", .string(action))])
    }

    /// `location:share-live {room, durationSec}`; returns the forwarded payload and the duration.
    public static func shareLive(_ payload: JSONValue) throws(RelayError) -> (JSONValue, Int64) {
        let room = try room(in: payload)
        guard let duration = payload["durationSec"]?.intValue, duration >= 1, duration <= maxLiveShareSeconds else {
            throw RelayError(.invalidPayload, "durationSec must be an integer in 1...\(maxLiveShareSeconds)")
        }
        return (.object([("room", .string(room)), ("durationSec", .int(duration))]), duration)
    }

    /// `location:update {room, lat, lng, accuracy?, heading?}`.
    public static func locationUpdate(_ payload: JSONValue) throws(RelayError) -> JSONValue {
        let room = try room(in: payload)
        var fields: [(String, JSONValue)] = [("room", .string(room))]
        fields.append(("lat", .double(try requiredNumber(payload, "lat", in: -90...90))))
        fields.append(("lng", .double(try requiredNumber(payload, "lng", in: -180...180))))
        if let accuracy = try number(payload, "accuracy", in: 0...1_000_000, required: false) { fields.append(("accuracy", .double(accuracy))) }
        if let heading = try number(payload, "heading", in: 0...360, required: false) { fields.append(("heading", .double(heading))) }
        return .object(fields)
    }

    /// A payload that only names a room: typing, `location:stop`, join, leave, presence.
    public static func roomOnly(_ payload: JSONValue) throws(RelayError) -> JSONValue {
        .object([("room", .string(try room(in: payload)))])
    }

    /// A custom event: any object with a valid `room`.
    public static func custom(_ payload: JSONValue) throws(RelayError) -> JSONValue {
        guard payload.isObject else { throw RelayError(.invalidPayload, "custom events carry a JSON object") }
        _ = try room(in: payload)
        return payload
    }

    /// A custom event with binary attachments: `custom(_:)`, plus the placeholders. The payload
    /// must hold exactly `attachmentCount` placeholders (`InboundEvent(binary:)` and
    /// `SocketPacket.decode` already checked their structure and numbering), and none may be in
    /// the top-level `from` or `ts` (as the value or nested inside it): `stamp` replaces those,
    /// which would orphan the attachment.
    /// With `attachmentCount` 0 it is `custom(_:)` (a `42` event's placeholder-like objects are
    /// plain JSON to every receiver).
    public static func custom(_ payload: JSONValue, attachmentCount: Int) throws(RelayError) -> JSONValue {
        let payload = try custom(payload)
        guard attachmentCount > 0 else { return payload }
        guard BinaryPlaceholder.count(in: payload) == attachmentCount else {
            throw RelayError(.invalidPayload, "the payload must hold one placeholder per attachment")
        }
        for key in stampedKeys where payload[key].map(BinaryPlaceholder.count) ?? 0 > 0 {
            throw RelayError(.invalidPayload, "\(key) is stamped by the relay and cannot hold an attachment")
        }
        return payload
    }

    /// The fields `stamp` sets.
    public static let stampedKeys = ["from", "ts"]

    /// Adds the server-stamped `from` and `ts`, replacing any the client sent. Only those two
    /// top-level fields change: placeholders anywhere else in the payload are kept as they are.
    public static func stamp(_ payload: JSONValue, from user: String, ts: Int64) -> JSONValue {
        payload.setting([("from", .string(user)), ("ts", .int(ts))])
    }
}
