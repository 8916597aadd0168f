import Atomics

/// How many connected clients negotiated permessage-deflate, take offsets (connection state
/// recovery), or both: every publish reads them, without a lock, to make a compressed or an
/// offset variant of a message only when someone will use it. Changed on connect and disconnect.
final class ClientCounts: Sendable {
    private let deflate = ManagedAtomic<Int>(0)
    private let offsets = ManagedAtomic<Int>(0)
    private let offsetsAndDeflate = ManagedAtomic<Int>(0)

    struct Snapshot {
        var deflate: Int
        var offsets: Int
        var offsetsAndDeflate: Int
    }

    var snapshot: Snapshot {
        Snapshot(
            deflate: deflate.load(ordering: .relaxed), offsets: offsets.load(ordering: .relaxed),
            offsetsAndDeflate: offsetsAndDeflate.load(ordering: .relaxed))
    }

    func add(deflate: Bool, takesOffsets: Bool) {
        change(by: 1, deflate: deflate, takesOffsets: takesOffsets)
    }

    func remove(deflate: Bool, takesOffsets: Bool) {
        change(by: -1, deflate: deflate, takesOffsets: takesOffsets)
    }

    private func change(by delta: Int, deflate usesDeflate: Bool, takesOffsets: Bool) {
        if usesDeflate { deflate.wrappingIncrement(by: delta, ordering: .relaxed) }
        if takesOffsets {
            offsets.wrappingIncrement(by: delta, ordering: .relaxed)
            if usesDeflate { offsetsAndDeflate.wrappingIncrement(by: delta, ordering: .relaxed) }
        }
    }
}
