/// The one rule for what a socket may see, asked on every path that hands a socket a room's
/// events: live delivery to a user's devices (a receipt forward names its room), recovery
/// replay, `room:sync` and other history reads, `receipt:sync`, presence queries. A path that
/// does not ask it is a path an event can leak through, whoever the sender named.
public enum DeliveryGate {
    /// Whether a socket logged in as `user` may see what belongs to `room`: its token allows the
    /// room, or (`member`) the socket is in the room already (joined through the backend). An
    /// event about no room (a backend emit to the user) is the user's own.
    public static func admits(_ user: AuthenticatedUser, room: String?, member: Bool = false) -> Bool {
        guard let room else { return true }
        return member || user.rooms.allows(room)
    }
}
