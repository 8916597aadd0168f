import NIOCore
import RelayCore

/// What a socket handler gives back for its event: the reply and the changes to the socket's
/// own state. Only the socket carries them out (`ClientSession.carryOut`): a handler reads the
/// socket (its id, loop, sid) but never writes to it or changes it.
struct SocketUpdate: Sendable {
    /// The ack or error reply, when the event wants one.
    var reply: EngineSession.Reply?
    var changes: [SocketChange] = []
    /// When the reply's bytes leave.
    var flush: ClientSession.Flush = .now
    /// Run once the reply is written: a committed receipt is forwarded after its ack.
    var afterReply: (@Sendable () -> Void)? = nil
}

/// A change a handler asks of its socket's state.
enum SocketChange: Sendable {
    /// Joined the stream, whose head was `head` once this node received it.
    case joined(StreamKey, head: StreamOffset)
    /// Left the stream: its offsets are no longer followed.
    case left(StreamKey)
    /// A new token of the same user took the old one's place (user, rooms, expiry).
    case refreshed(AuthenticatedUser)

    // The CONNECT's steps (`ConnectSetup`), in the order it asks for them.

    /// The token was verified: whether this CONNECT takes offsets.
    case connecting(takesOffsets: Bool)
    /// Registering with the hub as the user; with `held`, the hub's deliveries wait in it until
    /// `released`, else they are written at once.
    case registering(AuthenticatedUser, held: OutboundQueue<OutboundMessage>?)
    /// The hub refused the registration: not registered, nothing held.
    case registrationRefused
    /// The socket's private session id: a new one, or the recovered session's.
    case assigned(pid: String)
    /// Follows the stream's offsets from `head` (joined at CONNECT, or recovered).
    case following(StreamKey, from: StreamOffset)
    /// Answer the CONNECT.
    case answered(ConnectAnswer)
    /// Refuse the CONNECT (the session returns to awaiting one, or closes).
    case refused(RelayError)
    /// Write what a recovered socket missed, in order, before anything held.
    case replayed([OutboundMessage])
    /// Write what was held during the setup, skipping what the socket already has (offsets at or
    /// before `positions`), and stop holding.
    case released(after: [StreamKey: StreamOffset])
}

/// A handler's answer: now, or once what it waits for completes (on the socket's loop; a
/// handler turns its own failures into replies, so the future always succeeds).
enum HandlerResult {
    case now(SocketUpdate)
    case later(EventLoopFuture<SocketUpdate>)

    /// No reply and no change.
    static let nothing = HandlerResult.now(SocketUpdate())

    static func reply(_ reply: EngineSession.Reply?) -> HandlerResult { .now(SocketUpdate(reply: reply)) }
}
