import NIOCore
import RelayCore

/// How another node delivers an event the way this node does.
public struct Routing: Sendable, Equatable {
    /// Typing: every socket of this user is skipped, on every node.
    public var excludeUser: String?
    /// Receipts on a user stream: sockets that are members of this room got it from the room.
    public var skipMembersOf: String?
    /// Receipts on a user stream sent to the user's devices only (`receipt-audience devices`):
    /// every socket of the user whose token allows this room gets it, members or not.
    public var allowedIn: String?
    /// A backend emit with a window: every delivering node holds the latest per key and window.
    public var window: EmitWindow?

    public init(excludeUser: String? = nil, skipMembersOf: String? = nil, allowedIn: String? = nil, window: EmitWindow? = nil) {
        self.excludeUser = excludeUser
        self.skipMembersOf = skipMembersOf
        self.allowedIn = allowedIn
        self.window = window
    }
}

/// The one delivery path of the hub, as Centrifuge's broker: publish to a stream (a room or a
/// user), subscribe this node to streams, and read a stream's history. Eight requirements, as
/// Centrifuge's; the control messages between nodes are a contract of their own
/// (`ControlChannel`).
///
/// `MemoryBroker` serves one node; `RedisBroker` carries events between nodes over Redis pub/sub
/// and keeps history in Redis streams. The hub does not know which it has.
public protocol Broker: AnyObject, Sendable {
    /// Whether recoverable events are stored (history on).
    var keepsHistory: Bool { get }
    /// Whether events go to other nodes (a publish with no local recipient still matters).
    var crossesNodes: Bool { get }
    /// Hands the events of this node's subscriptions to `subscriber` (other nodes' events and,
    /// with Redis, this node's own recoverable ones), held weakly. Set once, before `start`.
    func attach(_ subscriber: any BrokerSubscriber)

    /// This node has (or no longer has) sockets following `stream`.
    func subscribe(_ stream: StreamKey)
    func unsubscribe(_ stream: StreamKey)
    /// Completes once this node receives the stream's events (Redis confirmed the
    /// subscription); a recovery reads history only after that, so nothing slips between.
    func whenSubscribed(_ stream: StreamKey, on loop: any EventLoop) -> EventLoopFuture<Void>
    /// Each stream's newest offset once this node receives the stream (`whenSubscribed`, then
    /// `head`): a CONNECT's rooms at once, in one future instead of three per stream (a
    /// reconnect with 20 rooms made some 60 futures here).
    func subscribedHeads(_ streams: [StreamKey], on loop: any EventLoop) -> EventLoopFuture<[(StreamKey, StreamOffset)]>

    /// Publishes an encoded event to `stream`. A recoverable event (with history on) first gets
    /// the stream's next offset and is stored; then every node's sockets get it in offset order:
    /// through `deliver` with its offset (memory: called under the stream's lock, so it must only
    /// hand the event to event loops), or, with Redis, through the stream's channel like on every
    /// other node (`deliver` is not called then). A plain event, or one the store could not take,
    /// is delivered through `deliver(nil)` at once, without an offset.
    func publish(_ publication: Publication, to stream: StreamKey, routing: Routing, recoverable: Bool, deliver: @escaping @Sendable (StreamOffset?) -> Void)

    /// The stream's events after `offset`, oldest first: at most `limit`, and about `maxBytes`.
    /// `.failure(.unavailable)` when the history does not reach back to `offset`. With `limit`
    /// 0, only the stream's head (`zero` without history, or when the store cannot be read),
    /// whatever `offset`: as Centrifuge's history call with a zero limit.
    func history(of stream: StreamKey, after offset: StreamOffset, limit: Int, maxBytes: Int, on loop: any EventLoop)
        -> EventLoopFuture<Result<HistoryPage<Publication>, HistoryError>>
}

extension Broker {
    /// Waits for every stream's subscription (whatever became of it), then reads each head.
    public func subscribedHeads(_ streams: [StreamKey], on loop: any EventLoop) -> EventLoopFuture<[(StreamKey, StreamOffset)]> {
        let subscribed = EventLoopFuture.andAllComplete(streams.map { whenSubscribed($0, on: loop) }, on: loop)
        let heads = streams.map { stream in subscribed.flatMap { self.head(of: stream, on: loop) }.map { (stream, $0) } }
        return EventLoopFuture.whenAllSucceed(heads, on: loop)
    }

    /// The stream's newest offset (`zero` when it has no history): `history` with limit 0.
    public func head(of stream: StreamKey, on loop: any EventLoop) -> EventLoopFuture<StreamOffset> {
        history(of: stream, after: .zero, limit: 0, maxBytes: 0, on: loop).map { (try? $0.get())?.head ?? .zero }
    }
}
