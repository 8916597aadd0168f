import CZlib
import NIOCore

/// Compresses whole messages for permessage-deflate with no context takeover: every message
/// starts from a reset stream, so the output is valid for any recipient and can be shared.
final class MessageDeflater {
    private var stream = z_stream()
    let windowBits: Int

    init(windowBits: Int = 15, level: Int32 = Z_DEFAULT_COMPRESSION) {
        self.windowBits = windowBits
        // Negative window bits: raw deflate, no zlib header (RFC 7692 §7.2.1).
        let rc = relay_deflate_init(&stream, level, -Int32(windowBits))
        precondition(rc == Z_OK, "deflateInit2 failed: \(rc)")
    }

    deinit { deflateEnd(&stream) }

    /// The compressed payload of one message, without the trailing `00 00 ff ff`.
    func compress(_ input: ByteBuffer, allocator: ByteBufferAllocator) -> ByteBuffer {
        deflateReset(&stream)
        var output = allocator.buffer(capacity: Int(deflateBound(&stream, uLong(input.readableBytes))) + 16)
        input.withUnsafeReadableBytes { inPtr in
            stream.next_in = UnsafeMutablePointer(mutating: inPtr.bindMemory(to: Bytef.self).baseAddress)
            stream.avail_in = uInt(inPtr.count)
            repeat {
                if output.writableBytes < 64 { output.reserveCapacity(minimumWritableBytes: output.capacity) }
                let written = output.writeWithUnsafeMutableBytes(minimumWritableBytes: 64) { outPtr in
                    stream.next_out = outPtr.bindMemory(to: Bytef.self).baseAddress
                    stream.avail_out = uInt(outPtr.count)
                    let before = outPtr.count
                    _ = deflate(&stream, Z_SYNC_FLUSH)
                    return before - Int(stream.avail_out)
                }
                _ = written
            } while stream.avail_in > 0 || stream.avail_out == 0
        }
        stream.next_in = nil
        stream.next_out = nil
        // A sync flush ends with an empty stored block, 00 00 ff ff, which the peer re-adds.
        if output.readableBytes >= 4 { output.moveWriterIndex(to: output.writerIndex - 4) }
        return output
    }
}
