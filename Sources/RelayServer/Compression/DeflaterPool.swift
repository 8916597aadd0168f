import NIOConcurrencyHelpers
import NIOCore

/// A few deflaters shared by all loops: a fanned-out message is compressed once, by whichever
/// thread publishes it, and the same compressed bytes go to every deflate recipient.
/// (`@unchecked Sendable`: `free` is only touched inside `lock`; a deflater taken out of it is
/// used by one thread until it is put back.)
final class DeflaterPool: @unchecked Sendable {
    private let lock = NIOLock()
    private var free: [MessageDeflater] = []

    func compress(_ input: ByteBuffer, allocator: ByteBufferAllocator = ByteBufferAllocator()) -> ByteBuffer {
        let deflater = lock.withLock { free.popLast() } ?? MessageDeflater()
        defer { lock.withLock { free.append(deflater) } }
        return deflater.compress(input, allocator: allocator)
    }
}
