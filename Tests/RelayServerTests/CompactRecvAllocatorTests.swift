import NIOCore
import XCTest

@testable import RelayServer

/// `CompactRecvAllocator` sizes reads as NIO's `AdaptiveRecvByteBufferAllocator` does, and fits a
/// channel's existential without a heap box.
final class CompactRecvAllocatorTests: XCTestCase {
    func testTheSameSizesAsNIOsAdaptiveAllocator() {
        var generator = SystemRandomNumberGenerator()
        for (minimum, initial, maximum) in [(64, 256, 65_536), (2, 2, 4), (64, 2048, 65_536), (100, 300, 70_000), (2, 1 << 20, 1 << 31)] {
            var ours = CompactRecvAllocator(minimum: minimum, initial: initial, maximum: maximum)
            var nio = AdaptiveRecvByteBufferAllocator(minimum: minimum, initial: initial, maximum: maximum)
            XCTAssertEqual(ours.nextBufferSize(), nio.nextBufferSize())
            for step in 0..<2_000 {
                let size = nio.nextBufferSize() ?? 0
                // Reads that fill the buffer, leave it half empty, or anything in between.
                let read = [size, size / 2, size / 4, 0, Int.random(in: 0...max(0, size), using: &generator)][step % 5]
                XCTAssertEqual(ours.record(actualReadBytes: read), nio.record(actualReadBytes: read), "\(minimum)/\(initial)/\(maximum) step \(step)")
                XCTAssertEqual(ours.nextBufferSize(), nio.nextBufferSize(), "\(minimum)/\(initial)/\(maximum) step \(step)")
            }
            XCTAssertEqual(ours.buffer(allocator: ByteBufferAllocator()).capacity, nio.buffer(allocator: ByteBufferAllocator()).capacity)
        }
    }

    func testItFitsAnExistentialsInlineBuffer() {
        XCTAssertLessThanOrEqual(MemoryLayout<CompactRecvAllocator>.size, 3 * MemoryLayout<Int>.size)
        XCTAssertGreaterThan(MemoryLayout<AdaptiveRecvByteBufferAllocator>.size, 3 * MemoryLayout<Int>.size, "NIO's does not: the reason for this one")
    }
}
