/// The key under which a queued event is replaced by a newer one when a socket falls behind
/// (the policy table says which events have one and how it is made). One type for the table,
/// every outbound queue and the cluster envelope.
public struct CoalescingKey: Hashable, Sendable {
    public var event: String
    public var room: String
    public var user: String

    public init(event: String, room: String, user: String) {
        self.event = event
        self.room = room
        self.user = user
    }
}
