import NIOCore
import RelayCore

/// The user directory of a single node: what this node sees is the whole truth.
public final class MemoryUserDirectory: UserDirectory {
    public init() {}

    public func updateUser(_ user: String, devices: Int, disconnectedAt: Int64?) {}

    public func users(_ local: [UserPresence], withRooms: Bool, on loop: any EventLoop) -> EventLoopFuture<PresenceAnswer<[UserPresence]>> {
        loop.makeSucceededFuture(PresenceAnswer(local))
    }

    public func restateUsers(_ local: [String: Int]) {}
}
