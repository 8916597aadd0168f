/// Who gets a committed receipt's forward (`receipt-audience`, per kind).
public enum ReceiptAudience: String, Sendable, CaseIterable {
    /// Every socket in the room but the sender's, and the author's devices outside the room
    /// (what Relay always did; group chats that show who read what to everyone).
    case room
    /// The devices chat apps tell: each message author's sockets, and the reader's own other
    /// sockets (its read state on its other devices) — each only where its token allows the
    /// room. The other members get nothing.
    case devices
}

/// The audience of each receipt kind.
public struct ReceiptAudiences: Sendable, Equatable {
    public var delivered: ReceiptAudience
    public var read: ReceiptAudience

    public init(delivered: ReceiptAudience, read: ReceiptAudience) {
        self.delivered = delivered
        self.read = read
    }

    public subscript(kind: ReceiptKind) -> ReceiptAudience {
        get { kind == .delivered ? delivered : read }
        set { if kind == .delivered { delivered = newValue } else { read = newValue } }
    }
}
