import NIOCore
import RelayCore

/// What one node publishes to the others on a room or user channel: a small JSON header line,
/// then the already-encoded Engine.IO message, unchanged (encoded once, on the origin node).
struct ClusterEnvelope {
    var origin: String
    var label: String
    /// Typing: every socket of this user is skipped, on every node.
    var excludeUser: String?
    /// Receipts on a user channel: sockets that are members of this room got it from the room.
    var skipMembersOf: String?
    var coalesceKey: OutboundQueue<OutboundMessage>.CoalesceKey?
    var durable: Bool
    var payload: ByteBuffer

    func encode(allocator: ByteBufferAllocator = ByteBufferAllocator()) -> ByteBuffer {
        var header: [(String, JSONValue)] = [("o", .string(origin)), ("l", .string(label))]
        if let excludeUser { header.append(("x", .string(excludeUser))) }
        if let skipMembersOf { header.append(("s", .string(skipMembersOf))) }
        if let k = coalesceKey { header.append(("k", .array([.string(k.event), .string(k.room), .string(k.user)]))) }
        if durable { header.append(("d", true)) }
        let head = JSONWriter.bytes(.object(header))
        var out = allocator.buffer(capacity: head.count + 1 + payload.readableBytes)
        out.writeBytes(head)
        out.writeInteger(UInt8(ascii: "\n"))
        var p = payload
        out.writeBuffer(&p)
        return out
    }

    static func decode(_ buffer: ByteBuffer) -> ClusterEnvelope? {
        let view = buffer.readableBytesView
        guard let newline = view.firstIndex(of: UInt8(ascii: "\n")),
            let header = try? JSONParser.parse(Array(view[view.startIndex..<newline])),
            case .string(let origin)? = header["o"]
        else { return nil }
        var payload = buffer
        payload.moveReaderIndex(forwardBy: newline - view.startIndex + 1)
        var key: OutboundQueue<OutboundMessage>.CoalesceKey?
        if case .array(let k)? = header["k"], k.count == 3, let e = k[0].stringValue, let r = k[1].stringValue, let u = k[2].stringValue {
            key = .init(event: e, room: r, user: u)
        }
        return ClusterEnvelope(
            origin: origin, label: header["l"]?.stringValue ?? "custom", excludeUser: header["x"]?.stringValue,
            skipMembersOf: header["s"]?.stringValue, coalesceKey: key, durable: header["d"]?.boolValue ?? false, payload: payload)
    }
}
