import CZlib
import NIOCore

/// Decompresses permessage-deflate messages (client context reset for every message, as
/// Relay always negotiates `client_no_context_takeover`), refusing output over a cap so that
/// a small compressed message cannot expand into a memory bomb.
final class MessageInflater {
    enum InflateError: Error, Equatable {
        /// The decompressed message would exceed the cap.
        case tooLarge
        case corrupt
    }

    private var stream = z_stream()
    private static let tail: [UInt8] = [0x00, 0x00, 0xFF, 0xFF]

    init() {
        let rc = relay_inflate_init(&stream, -15)
        precondition(rc == Z_OK, "inflateInit2 failed: \(rc)")
    }

    deinit { inflateEnd(&stream) }

    func decompress(_ input: ByteBuffer, maxBytes: Int, allocator: ByteBufferAllocator) throws(InflateError) -> ByteBuffer {
        inflateReset(&stream)
        var output = allocator.buffer(capacity: min(maxBytes, max(256, input.readableBytes * 4)))
        var result: InflateError?
        var compressed = input
        compressed.writeBytes(Self.tail)
        compressed.withUnsafeReadableBytes { inPtr in
            stream.next_in = UnsafeMutablePointer(mutating: inPtr.bindMemory(to: Bytef.self).baseAddress)
            stream.avail_in = uInt(inPtr.count)
            while result == nil {
                if output.readableBytes >= maxBytes + 1 { result = .tooLarge; break }
                let room = min(maxBytes + 1 - output.readableBytes, 64 * 1024)
                var rc: Int32 = Z_OK
                output.writeWithUnsafeMutableBytes(minimumWritableBytes: room) { outPtr in
                    let usable = min(outPtr.count, room)
                    stream.next_out = outPtr.bindMemory(to: Bytef.self).baseAddress
                    stream.avail_out = uInt(usable)
                    rc = inflate(&stream, Z_SYNC_FLUSH)
                    return usable - Int(stream.avail_out)
                }
                if rc == Z_STREAM_END { break }
                if rc == Z_BUF_ERROR && stream.avail_in == 0 { break }  // all input consumed
                if rc != Z_OK && rc != Z_BUF_ERROR { result = .corrupt; break }
                if stream.avail_in == 0 && stream.avail_out > 0 { break }
            }
        }
        stream.next_in = nil
        stream.next_out = nil
        if let result { throw result }
        if output.readableBytes > maxBytes { throw .tooLarge }
        return output
    }
}
