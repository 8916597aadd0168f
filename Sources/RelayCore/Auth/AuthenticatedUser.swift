/// The identity a verified token establishes.
public struct AuthenticatedUser: Sendable, Equatable {
    /// `sub`: an NFC identifier (see `Identifier`), so byte-exact as a dictionary key.
    public var userID: String
    public var rooms: RoomAuthorization
    /// `exp`, seconds since 1970.
    public var expiresAt: Int64
    /// `iat`, seconds since 1970, when the token has one (revocations compare it).
    public var issuedAt: Int64?

    public init(userID: String, rooms: RoomAuthorization, expiresAt: Int64, issuedAt: Int64? = nil) {
        self.userID = userID
        self.rooms = rooms
        self.expiresAt = expiresAt
        self.issuedAt = issuedAt
    }
}
