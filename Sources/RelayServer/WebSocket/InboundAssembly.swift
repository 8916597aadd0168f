import NIOCore
import NIOWebSocket
import RelayCore

/// A socket's inbound side: the reader that turns frames into whole messages (made at the first
/// frame), held to the session's limits in force (`LimitsInForce`): the small
/// pre-authentication size until CONNECT succeeds and again after a `41`, `max-payload` while
/// connected. (The frame codec holds frames to the same limit at their header.)
struct InboundAssembly {
    private var reader: WebSocketMessageReader?
    /// The limits in force, for the reader made at the first frame.
    private(set) var limits: LimitsInForce

    init(limits: LimitsInForce) {
        self.limits = limits
    }

    /// Feeds one frame; the reader is made with `makeReader` (given the message limit in force)
    /// on the first.
    mutating func read(_ frame: WebSocketFrame, allocator: ByteBufferAllocator, makeReader: (Int) -> WebSocketMessageReader) -> WebSocketMessageReader.Output {
        var reader = self.reader ?? makeReader(limits.maxMessageBytes)
        self.reader = nil  // one reference while it reads: its fragments are not copied
        let output = reader.read(frame, allocator: allocator)
        self.reader = reader
        return output
    }

    /// The session's limits changed: the reader takes the new message size.
    mutating func apply(_ limits: LimitsInForce) {
        self.limits = limits
        reader?.maxMessageBytes = limits.maxMessageBytes
    }
}
