/// The identity a verified token establishes.
public struct AuthenticatedUser: Sendable, Equatable {
    /// `sub`: an NFC identifier (see `Identifier`), so byte-exact as a dictionary key.
    public var userID: String
    public var rooms: RoomAuthorization
    /// `exp`, seconds since 1970.
    public var expiresAt: Int64

    public init(userID: String, rooms: RoomAuthorization, expiresAt: Int64) {
        self.userID = userID
        self.rooms = rooms
        self.expiresAt = expiresAt
    }
}
