/// The moments after a polling session moved to WebSocket, when the two transports overlap.
///
/// A client may send the upgrade's `5` before the answer to its last polling `POST` came back
/// (socket.io-client-swift does: its CONNECT `POST` and the WebSocket race), so that `POST` can
/// reach the relay after the `5`. For `windowMs` after the upgrade such a request is still the
/// session's: its packets are taken, and Socket.IO packets arriving on the WebSocket meanwhile,
/// while no CONNECT has come yet, wait (bounded) so the late CONNECT goes first, as the client
/// sent them.
public struct UpgradeHandover: Sendable, Equatable {
    /// Packets held at most, and their bytes: a client that sends more before its CONNECT is not
    /// waiting for one; the rest is taken at once.
    public static let maxHeldPackets = 16
    public static let maxHeldBytes = 64 * 1024

    /// Until when (monotonic ms) polling requests are still the session's.
    @PackedDeadline public private(set) var until: Int64? = nil
    private var held: [[UInt8]] = []
    /// The bytes held (at most `maxHeldPackets` packets: summed when asked, not kept in every
    /// session).
    private var heldBytes: Int { held.reduce(0) { $0 + $1.count } }

    public init() {}

    /// The upgrade completed at `now`.
    public mutating func begin(now: Int64, windowMs: Int64) {
        until = now + max(0, windowMs)
    }

    /// A polling request at `now` still belongs to the session.
    public func isOpen(now: Int64) -> Bool {
        guard let until else { return false }
        return now < until
    }

    /// Keeps `packet` for later; `false` when the bounds are reached (take it now).
    public mutating func hold(_ packet: ArraySlice<UInt8>) -> Bool {
        guard held.count < Self.maxHeldPackets, heldBytes + packet.count <= Self.maxHeldBytes else { return false }
        held.append(Array(packet))
        return true
    }

    public var isHolding: Bool { !held.isEmpty }

    /// When the held packets must be taken even without a CONNECT.
    public var deadline: Int64? { held.isEmpty ? nil : until }

    /// The held packets, in order; nothing is held afterwards.
    public mutating func release() -> [[UInt8]] {
        defer { held = [] }
        return held
    }

    /// The window is over (it passed, or the session closed).
    public mutating func end() {
        until = nil
        held = []
    }
}
