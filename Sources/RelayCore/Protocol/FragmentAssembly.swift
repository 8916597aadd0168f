/// A WebSocket message that arrives in fragments (RFC 6455 §5.4): its bytes so far, held to the
/// limit in force, in one growing array. Appending never copies what came before except when the
/// array grows (geometrically), so a message of n bytes costs O(n) copies however it is split —
/// an empty continuation costs nothing but its frame's budget. `copiedBytes` counts every byte
/// written or moved, for the fuzz property that says so (`FuzzFragments`).
public struct FragmentAssembly: Sendable {
    public private(set) var bytes: [UInt8]
    /// Bytes written into the message plus bytes moved when it grew.
    public private(set) var copiedBytes: Int

    /// The first fragment.
    public init(first: [UInt8]) {
        bytes = first
        copiedBytes = 0
    }

    /// Appends a fragment unless the message would pass `limit` bytes (then `false`, nothing
    /// appended: the caller closes with 1009).
    public mutating func append<Fragment: Collection>(_ fragment: Fragment, limit: Int) -> Bool where Fragment.Element == UInt8 {
        let (total, overflow) = bytes.count.addingReportingOverflow(fragment.count)
        guard !overflow, total <= limit else { return false }
        guard !fragment.isEmpty else { return true }
        let capacity = bytes.capacity
        let kept = bytes.count
        bytes.append(contentsOf: fragment)
        copiedBytes &+= fragment.count &+ (bytes.capacity != capacity ? kept : 0)
        return true
    }

    public var count: Int { bytes.count }
}
