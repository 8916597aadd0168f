import NIOCore
import NIOWebSocket
import RelayCore

/// A socket's inbound side: the reader that turns frames into whole messages (made at the first
/// frame), and the frame guard ahead of NIO's decoder. Both enforce the session's limits in
/// force (`LimitsInForce`): the small pre-authentication size until CONNECT succeeds and again
/// after a `41`, `max-payload` while connected, when the guard is out of the pipeline.
struct InboundAssembly {
    private var reader: WebSocketMessageReader?
    /// The pre-authentication frame guard, while it is in the pipeline.
    private(set) var frameGuard: FrameSizeGuard?
    /// The limits in force, for the reader made at the first frame.
    private(set) var limits: LimitsInForce

    /// What the pipeline must do for new limits.
    enum GuardChange {
        case none
        /// Put this guard in front of the frame decoder.
        case add(FrameSizeGuard)
        /// Take this guard out.
        case remove(FrameSizeGuard)
    }

    init(frameGuard: FrameSizeGuard?, limits: LimitsInForce) {
        self.frameGuard = frameGuard
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

    /// The session's limits changed: the reader takes the new message size, and the guard is
    /// added or taken out as the limits say.
    mutating func apply(_ limits: LimitsInForce) -> GuardChange {
        self.limits = limits
        reader?.maxMessageBytes = limits.maxMessageBytes
        switch (limits.preAuthentication, frameGuard) {
        case (true, nil):
            let added = FrameSizeGuard(limit: limits.maxMessageBytes)
            frameGuard = added
            return .add(added)
        case (false, let present?):
            frameGuard = nil
            return .remove(present)
        default:
            return .none
        }
    }
}
