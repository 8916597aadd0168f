import RelayCore

/// One fan-out step for the sockets of one loop partition, as the hub hands it over: to a room's
/// members, to a user's devices, or to a user's devices outside a room (receipts to an author).
enum PartitionDelivery: Sendable {
    case room(String, OutboundMessage, excludeConnection: ConnectionID?, excludeUser: String?)
    case user(String, OutboundMessage)
    case userOutsideRoom(String, OutboundMessage, room: String, excludeConnection: ConnectionID?)
    /// The user's sockets allowed the room, members or not (a receipt to its author's devices).
    case userAllowedIn(String, OutboundMessage, room: String, excludeConnection: ConnectionID?)
}
