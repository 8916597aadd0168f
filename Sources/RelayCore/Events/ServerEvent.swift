/// An event Relay makes itself, typed as client events are: each names its entry in the policy
/// table, so what it is (recoverable, coalesced, its metric label) is read from there, never
/// looked up by name.
public enum ServerEvent: Sendable, Equatable, CaseIterable {
    case typingStart, typingStop
    case presenceJoin, presenceLeave
    /// A live share ended without its sender's `location:stop`: it expired or the socket closed.
    case locationStop
    case authExpiring, authExpired

    public static func typing(_ isTyping: Bool) -> ServerEvent { isTyping ? .typingStart : .typingStop }

    public var policy: EventPolicy {
        switch self {
        case .typingStart: return EventPolicyTable.typingStart
        case .typingStop: return EventPolicyTable.typingStop
        case .presenceJoin: return EventPolicyTable.presenceJoin
        case .presenceLeave: return EventPolicyTable.presenceLeave
        case .locationStop: return EventPolicyTable.locationStop
        case .authExpiring: return EventPolicyTable.authExpiring
        case .authExpired: return EventPolicyTable.authExpired
        }
    }

    public var name: String { policy.name }
}
