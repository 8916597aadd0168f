import NIOConcurrencyHelpers
import RelayCore
import RelayLocks

/// A fixed number of locks ("stripes"), each guarding the part of a keyed state whose keys hash
/// to it (Centrifuge's hub does the same with 64 shards by channel). Two operations contend only
/// when their keys land on the same stripe. Not to be confused with an event loop's partition
/// of the sockets (`LoopPartition`), which needs no lock.
package struct LockStripes<Value: Sendable>: Sendable {
    package let boxes: [AuditedLock<Value>]
    private let mask: Int

    /// `count` is rounded up to a power of two.
    package init(count: Int, _ make: () -> Value) {
        var n = 1
        while n < max(1, count) { n <<= 1 }
        self.boxes = (0..<n).map { _ in AuditedLock(make()) }
        self.mask = n - 1
    }

    /// The stripe of a string key. Swift's hasher is seeded per process, so a client cannot
    /// choose room names that all land on one stripe.
    package func stripe(for key: String) -> AuditedLock<Value> {
        boxes[index(for: key)]
    }

    package func index(for key: String) -> Int { key.hashValue & mask }

    /// The stripe of a connection: ids are sequential, so the low bits spread them evenly.
    package func stripe(for id: ConnectionID) -> AuditedLock<Value> {
        boxes[Int(truncatingIfNeeded: id.raw) & mask]
    }

    /// Reads every stripe in turn, one lock at a time (admin views, timers).
    package func map<T>(_ body: (inout Value) -> T) -> [T] {
        boxes.map { $0.withLockedValue(body) }
    }
}
