import Logging
import NIOCore
import RelayCore

/// A token's lifetime on a live socket: the session announces `auth:expiring` and closes at
/// `exp` + leeway (EngineSession's deadlines); `auth:refresh` swaps in a new token of the same
/// user, and the rooms the new token no longer allows are left.
extension SocketSession {
    /// Verifies `token` for `auth:refresh`; on success the socket's user, rooms and expiry are
    /// the new token's.
    func refresh(with token: String, ackID: Int64?, current: AuthenticatedUser) {
        let handler = NIOLoopBound(self, eventLoop: eventLoop)
        relay.authenticate(token, eventLoop).whenSuccess { result in
            handler.value.refreshVerified(result, ackID: ackID, current: current)
        }
    }

    private func refreshVerified(_ result: Result<AuthenticatedUser, RelayError>, ackID: Int64?, current: AuthenticatedUser) {
        guard !closing, let shard, case .connected = session.phase else { return }
        let refused: RelayError?
        switch result {
        case .failure(let error): refused = error
        case .success(let user) where user.userID != current.userID: refused = RelayError(.tokenSubjectMismatch)
        case .success(let user) where hub.isRevoked(user): refused = RelayError(.tokenRevoked)
        case .success: refused = nil
        }
        if let refused {
            hub.metrics.tokenRefreshes["refused"]?.increment()
            reply(.failure(refused, event: "auth:refresh", ackID: ackID))
            return
        }
        guard case .success(let user) = result else { return }
        // Rooms the new token no longer allows are left (others see presence:leave).
        var left: [String] = []
        for room in hub.rooms(of: connectionID).sorted() where !user.rooms.allows(room) {
            if hub.leave(room: room, connection: connectionID, on: shard) {
                recoveryLog.unfollow(.room(room))
                left.append(room)
            }
        }
        registeredUser = user
        session.tokenRefreshed(user, now: hub.clock.monotonicMs(), wallMs: hub.clock.wallMs())
        hub.metrics.tokenRefreshes["ok"]?.increment()
        let payload = JSONValue.object([("ok", true), ("exp", .int(user.expiresAt)), ("left", .array(left.map { .string($0) }))])
        // Without an ack, only the timer follows the new expiry.
        if let ackID { reply(.ack(id: ackID, payload: payload)) } else { perform([]) }
    }
}
