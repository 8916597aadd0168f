import NIOCore
import RelayCore

/// The membership steps, for tests and the lock benchmark that drive a hub without sockets.
/// (Socket handlers are given `Membership` itself.)
extension Hub {
    public func register(_ sink: any ConnectionSink, sid: String, user: String, on partition: LoopPartition, deflate: Bool = false, ip: String = "", takesOffsets: Bool = false) throws(RelayError) {
        try membership.register(sink, sid: sid, user: user, on: partition, deflate: deflate, ip: ip, takesOffsets: takesOffsets)
    }

    public func unregister(_ id: ConnectionID, sid: String, user: String, on partition: LoopPartition, deflate: Bool = false, takesOffsets: Bool = false) {
        membership.unregister(id, sid: sid, user: user, on: partition, deflate: deflate, takesOffsets: takesOffsets)
    }

    public func join(room: String, sink: any ConnectionSink, user: String, on partition: LoopPartition) throws(RelayError) -> EventLoopFuture<[PresenceEntry]> {
        try membership.join(room: room, sink: sink, user: user, on: partition)
    }

    public func leave(room: String, connection id: ConnectionID, on partition: LoopPartition) -> Bool {
        membership.leave(room: room, connection: id, on: partition)
    }
}
