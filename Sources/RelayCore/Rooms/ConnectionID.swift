/// A process-unique id for one socket. The wire `sid` is derived from it.
public struct ConnectionID: Hashable, Sendable, Comparable, CustomStringConvertible {
    public let raw: UInt64
    public init(_ raw: UInt64) { self.raw = raw }
    public static func < (a: ConnectionID, b: ConnectionID) -> Bool { a.raw < b.raw }
    public var description: String { String(raw) }
}

/// One entry of a room's presence list: a user and how many of their devices are in it.
public struct PresenceEntry: Equatable, Sendable {
    public var user: String
    public var devices: Int
    public init(user: String, devices: Int) {
        self.user = user
        self.devices = devices
    }

    public var json: JSONValue { .object([("user", .string(user)), ("devices", .int(Int64(devices)))]) }
}
