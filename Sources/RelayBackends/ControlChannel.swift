/// The nodes' control plane, beside the delivery path: messages for every other node
/// (`ControlMessage`: end a user's sessions, hand a recovering session over). One node has no
/// one to tell (`LocalControlChannel`); in a cluster they ride on Redis (`RedisBroker`).
public protocol ControlChannel: AnyObject, Sendable {
    /// Whether a broadcast can reach another node now (a cluster whose link is up).
    var reachesOtherNodes: Bool { get }
    /// Sends a control message to every other node.
    func broadcast(_ control: ControlMessage)
    /// Receives other nodes' control messages. Set once, before the node starts.
    func setControlHandler(_ handler: @escaping @Sendable (ControlMessage) -> Void)
}

/// One node's control channel: there is no other node to tell.
public final class LocalControlChannel: ControlChannel {
    public init() {}
    public var reachesOtherNodes: Bool { false }
    public func broadcast(_ control: ControlMessage) {}
    public func setControlHandler(_ handler: @escaping @Sendable (ControlMessage) -> Void) {}
}
