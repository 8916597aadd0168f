/// A history stream: the recoverable events of one room, or of one user (events addressed to
/// the user's devices rather than to a room).
public enum StreamKey: Hashable, Sendable {
    case room(String)
    case user(String)

    /// `r:<room>` or `u:<user>`: the name the tag is computed from and the key suffix in Redis.
    public var name: String {
        switch self {
        case .room(let room): return "r:" + room
        case .user(let user): return "u:" + user
        }
    }

    /// Parses `name` back (`r:` / `u:` prefix).
    public init?(name: some StringProtocol) {
        if name.hasPrefix("r:") {
            self = .room(String(name.dropFirst(2)))
        } else if name.hasPrefix("u:") {
            self = .user(String(name.dropFirst(2)))
        } else {
            return nil
        }
    }

    /// FNV-1a (32 bits) of `name`: names the stream inside a wire offset, so one offset string
    /// says which of a socket's streams it belongs to.
    public var tag: UInt32 {
        var hash: UInt32 = 0x811C_9DC5
        for byte in name.utf8 {
            hash ^= UInt32(byte)
            hash = hash &* 0x0100_0193
        }
        return hash
    }
}
