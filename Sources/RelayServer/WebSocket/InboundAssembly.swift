import NIOCore
import NIOWebSocket

/// A socket's inbound side: the reader that turns frames into whole messages (made at the first
/// frame), and the frame guard ahead of NIO's decoder. Both hold the small pre-authentication
/// limit until CONNECT succeeds (`authenticated`), then the reader takes `max-payload` and the
/// guard leaves the pipeline.
struct InboundAssembly {
    private var reader: WebSocketMessageReader?
    /// The pre-authentication frame guard, removed once CONNECT succeeded.
    private(set) var frameGuard: FrameSizeGuard?

    init(frameGuard: FrameSizeGuard?) {
        self.frameGuard = frameGuard
    }

    /// Feeds one frame; the reader is made with `makeReader` on the first.
    mutating func read(_ frame: WebSocketFrame, allocator: ByteBufferAllocator, makeReader: () -> WebSocketMessageReader) -> WebSocketMessageReader.Output {
        var reader = self.reader ?? makeReader()
        let output = reader.read(frame, allocator: allocator)
        self.reader = reader
        return output
    }

    /// CONNECT succeeded: messages up to `maxPayload`; returns the guard to take out of the pipeline.
    mutating func authenticated(maxPayload: Int) -> FrameSizeGuard? {
        reader?.maxMessageBytes = maxPayload
        defer { frameGuard = nil }
        return frameGuard
    }
}
