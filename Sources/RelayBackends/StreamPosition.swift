import NIOCore
import RelayCore

/// Where a recoverable event sits: its stream and offset.
public struct StreamPosition: Sendable, Hashable {
    public var stream: StreamKey
    public var offset: StreamOffset

    public init(stream: StreamKey, offset: StreamOffset) {
        self.stream = stream
        self.offset = offset
    }

    /// What a client sees: `<ms>-<seq>:<tag>`.
    public var wire: WireOffset { WireOffset(offset, stream: stream) }
}
