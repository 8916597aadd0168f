import NIOCore
import RelayBackends
import RelayLocks

/// A few deflaters shared by all loops: a fanned-out message is compressed once, by whichever
/// thread publishes it, and the same compressed bytes go to every deflate recipient.
/// The free list is behind an `AuditedLock`, held only to take or give back a deflater, never
/// while compressing. (`@unchecked Sendable`: a deflater taken out of the list is used by one
/// thread until it is put back; the list itself only inside its lock.)
final class DeflaterPool: @unchecked Sendable {
    private let free = AuditedLock<[MessageDeflater]>([])

    func compress(_ input: ByteBuffer, allocator: ByteBufferAllocator = ByteBufferAllocator()) -> ByteBuffer {
        // zlib takes microseconds per kilobyte: never while a shared lock (a broker stream, a
        // room stripe) makes others wait.
        assert(LockAudit.noneHeld(), "compressing under a lock")
        let deflater = free.withLockedValue { $0.popLast() } ?? MessageDeflater()
        defer { free.withLockedValue { $0.append(deflater) } }
        return deflater.compress(input, allocator: allocator)
    }
}
