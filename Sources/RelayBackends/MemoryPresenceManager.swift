import NIOCore
import RelayCore

/// Presence of a single node: what this node sees is the whole truth.
public final class MemoryPresenceManager: PresenceManager {
    public init() {}

    public func update(room: String, user: String, local: PresenceUpdate, on loop: any EventLoop) -> EventLoopFuture<PresenceUpdate> {
        loop.makeSucceededFuture(local)
    }

    public func presence(room: String, local: [PresenceEntry], on loop: any EventLoop) -> EventLoopFuture<[PresenceEntry]> {
        loop.makeSucceededFuture(local)
    }
}


extension MemoryPresenceManager {
    public func roomPresence(room: String, local: [PresenceEntry], on loop: any EventLoop) -> EventLoopFuture<PresenceAnswer<[PresenceEntry]>> {
        loop.makeSucceededFuture(PresenceAnswer(local))
    }

    public func storedEntries(on loop: any EventLoop) -> EventLoopFuture<[StoredPresence]> {
        loop.makeSucceededFuture([])
    }
}
