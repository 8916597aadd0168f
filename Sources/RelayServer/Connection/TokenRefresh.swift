import NIOCore
import RelayCore

/// `auth:refresh` on a live socket: the session announces `auth:expiring` and closes at
/// `exp` + leeway (EngineSession's deadlines); a new token of the same user takes the old one's
/// place, and the rooms it no longer allows are left. Returns what the socket carries out: the
/// reply, the rooms left, the new token.
struct TokenRefresh {
    let services: EventServices
    /// The socket refreshed, read for its id, loop and partition.
    let socket: ClientSession

    /// Verifies `token`; on success the socket's user, rooms and expiry become the new token's.
    func refresh(with token: String, ackID: Int64?, current: AuthenticatedUser) -> HandlerResult {
        let bound = NIOLoopBound(self, eventLoop: socket.eventLoop)
        let connection = socket.connectionID
        return .later(services.authenticate(token, socket.eventLoop).map { result in
            bound.value.verified(result, ackID: ackID, current: current, connection: connection)
        })
    }

    private func verified(_ result: Result<AuthenticatedUser, RelayError>, ackID: Int64?, current: AuthenticatedUser, connection: ConnectionID) -> SocketUpdate {
        // Closing, or no longer the connection that asked (a `41` came meanwhile): nothing to do.
        guard socket.connectionID == connection, socket.connectedUser != nil else { return SocketUpdate() }
        let refused: RelayError?
        switch result {
        case .failure(let error): refused = error
        case .success(let user) where user.userID != current.userID: refused = RelayError(.tokenSubjectMismatch)
        case .success(let user) where services.revocations.isRevoked(user): refused = RelayError(.tokenRevoked)
        case .success: refused = nil
        }
        if let refused {
            services.metrics.connections.tokenRefreshes["refused"]?.increment()
            return SocketUpdate(reply: .failure(refused, event: EventPolicyTable.authRefresh.name, ackID: ackID))
        }
        guard case .success(let user) = result else { return SocketUpdate() }
        // Rooms the new token no longer allows are left (others see presence:leave).
        var changes: [SocketChange] = []
        var left: [String] = []
        for room in services.membership.rooms(of: socket.connectionID).sorted() where !user.rooms.allows(room) {
            if services.membership.leave(room: room, connection: socket.connectionID, on: socket.partition) {
                changes.append(.left(.room(room)))
                left.append(room)
            }
        }
        changes.append(.refreshed(user))
        services.metrics.connections.tokenRefreshes["ok"]?.increment()
        // No ack id: no reply, only the timer follows the new expiry.
        let reply = ackID.map { EngineSession.Reply.ack(id: $0, payload: .object([("ok", true), ("exp", .int(user.expiresAt)), ("left", .array(left.map { .string($0) }))])) }
        return SocketUpdate(reply: reply, changes: changes)
    }
}
