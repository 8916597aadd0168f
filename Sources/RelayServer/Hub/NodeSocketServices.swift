/// The node's services that only sockets use, made by the hub next to the shared ones.
struct NodeSocketServices: Sendable {
    let membership: Membership
    let typing: TypingService
    let locations: LiveLocationService
    let handover: RecoveryHandover
}
