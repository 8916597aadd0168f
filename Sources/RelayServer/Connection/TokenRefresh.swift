import NIOCore
import RelayCore

/// `auth:refresh` on a live socket: the session announces `auth:expiring` and closes at
/// `exp` + leeway (EngineSession's deadlines); a new token of the same user takes the old one's
/// place, and the rooms it no longer allows are left.
struct TokenRefresh {
    let socket: SocketSession

    /// Verifies `token`; on success the socket's user, rooms and expiry are the new token's.
    func refresh(with token: String, ackID: Int64?, current: AuthenticatedUser) {
        let bound = NIOLoopBound(self, eventLoop: socket.eventLoop)
        socket.relay.authenticate(token, socket.eventLoop).whenSuccess { result in
            bound.value.verified(result, ackID: ackID, current: current)
        }
    }

    private func verified(_ result: Result<AuthenticatedUser, RelayError>, ackID: Int64?, current: AuthenticatedUser) {
        guard !socket.isClosing, case .connected = socket.session.phase else { return }
        let hub = socket.hub
        let refused: RelayError?
        switch result {
        case .failure(let error): refused = error
        case .success(let user) where user.userID != current.userID: refused = RelayError(.tokenSubjectMismatch)
        case .success(let user) where hub.revocations.isRevoked(user): refused = RelayError(.tokenRevoked)
        case .success: refused = nil
        }
        if let refused {
            hub.metrics.connections.tokenRefreshes["refused"]?.increment()
            socket.reply(.failure(refused, event: EventPolicyTable.authRefresh.name, ackID: ackID))
            return
        }
        guard case .success(let user) = result else { return }
        // Rooms the new token no longer allows are left (others see presence:leave).
        var left: [String] = []
        for room in hub.rooms.rooms(of: socket.connectionID).sorted() where !user.rooms.allows(room) {
            if hub.leave(room: room, connection: socket.connectionID, on: socket.partition) {
                socket.connectState.unfollow(.room(room))
                left.append(room)
            }
        }
        socket.connectState.refreshed(user)
        socket.session.tokenRefreshed(user, now: hub.clock.monotonicMs(), wallMs: hub.clock.wallMs())
        hub.metrics.connections.tokenRefreshes["ok"]?.increment()
        guard let ackID else {
            // No reply: only the timer follows the new expiry.
            socket.perform([])
            return
        }
        socket.reply(.ack(id: ackID, payload: .object([("ok", true), ("exp", .int(user.expiresAt)), ("left", .array(left.map { .string($0) }))])))
    }
}
