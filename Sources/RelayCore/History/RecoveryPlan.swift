/// What a reconnect that names a kept session gets, decided before any history is read: a new
/// session, or the missed events of each stream after its cut.
public enum RecoveryPlan: Sendable, Equatable {
    /// Not recovered: a new session, for this reason.
    case startFresh(RecoveryResult)
    /// Read every stream's history after its cut: the user's stream, and the session's `rooms`
    /// that the new token still allows.
    case readMissed(rooms: [String], after: [StreamKey: StreamOffset])

    /// The plan for `user`, who sent `request`, coming back to `record`: the same user, an offset
    /// that is one, and a position in every stream that the session's log can tell.
    public init(recovering record: KeptSession, as user: AuthenticatedUser, request: ConnectRequest) {
        guard record.userID == user.userID else {
            self = .startFresh(.userMismatch)
            return
        }
        guard !request.offsetIsInvalid else {
            self = .startFresh(.invalidOffset)
            return
        }
        guard let cuts = record.log.cuts(lastReceived: request.offset), let userCut = cuts[.user(user.userID)] else {
            self = .startFresh(.historyGone)
            return
        }
        // Rooms are re-checked against the new token.
        let rooms = record.rooms.filter { user.rooms.allows($0) && cuts[.room($0)] != nil }
        var wanted: [StreamKey: StreamOffset] = [.user(user.userID): userCut]
        for room in rooms { wanted[.room(room)] = cuts[.room(room)] }
        self = .readMissed(rooms: rooms, after: wanted)
    }
}
