import NIOCore
import RelayBackends
import RelayCore

/// What one node publishes to the others on a room or user channel: a small JSON header line,
/// then the already-encoded Engine.IO message, unchanged (encoded once, on the origin node),
/// then a binary packet's attachments (their lengths in the header's `a`, the message's in `p`).
package struct ClusterEnvelope {
    package var origin: String
    package var label: String
    /// Typing: every socket of this user is skipped, on every node.
    package var excludeUser: String?
    /// Receipts on a user channel: sockets that are members of this room got it from the room.
    package var skipMembersOf: String?
    /// Receipts on a user channel to the user's devices only: those allowed this room.
    package var allowedIn: String? = nil
    package var coalescingKey: CoalescingKey?
    package var durable: Bool
    package var payload: ByteBuffer
    package var attachments: [ByteBuffer] = []
    /// The socket id of the sender the event skipped (history replays skip it too).
    package var originSID: String? = nil
    /// A backend emit with a window: the key and window every delivering node applies.
    package var window: EmitWindow? = nil

    package func encode(allocator: ByteBufferAllocator = ByteBufferAllocator()) -> ByteBuffer {
        var header: [(String, JSONValue)] = [("o", .string(origin)), ("l", .string(label))]
        if let excludeUser { header.append(("x", .string(excludeUser))) }
        if let skipMembersOf { header.append(("s", .string(skipMembersOf))) }
        if let allowedIn { header.append(("g", .string(allowedIn))) }
        if let k = coalescingKey { header.append(("k", .array([.string(k.event), .string(k.room), .string(k.user)]))) }
        if durable { header.append(("d", true)) }
        if let originSID { header.append(("c", .string(originSID))) }
        if let window { header.append(("w", .array([.string(window.key), .int(window.windowMs)]))) }
        if !attachments.isEmpty {
            header.append(("p", .int(Int64(payload.readableBytes))))
            header.append(("a", .array(attachments.map { .int(Int64($0.readableBytes)) })))
        }
        let head = JSONWriter.bytes(.object(header))
        var out = allocator.buffer(capacity: head.count + 1 + attachments.reduce(payload.readableBytes) { $0 + $1.readableBytes })
        out.writeBytes(head)
        out.writeInteger(UInt8(ascii: "\n"))
        var p = payload
        out.writeBuffer(&p)
        for var attachment in attachments { out.writeBuffer(&attachment) }
        return out
    }

    package static func decode(_ buffer: ByteBuffer) -> ClusterEnvelope? {
        let view = buffer.readableBytesView
        guard let newline = view.firstIndex(of: UInt8(ascii: "\n")),
            let header = try? JSONParser.parse(Array(view[view.startIndex..<newline])),
            case .string(let origin)? = header["o"]
        else { return nil }
        var payload = buffer
        payload.moveReaderIndex(forwardBy: newline - view.startIndex + 1)
        var attachments: [ByteBuffer] = []
        if let length = header["p"]?.intValue, case .array(let lengths)? = header["a"] {
            // Malformed lengths from another node drop the envelope, never trap.
            guard length >= 0, length <= payload.readableBytes, let message = payload.readSlice(length: Int(length)) else { return nil }
            for item in lengths {
                guard let n = item.intValue, n >= 0, n <= payload.readableBytes, let slice = payload.readSlice(length: Int(n)) else { return nil }
                attachments.append(slice)
            }
            payload = message
        }
        var key: CoalescingKey?
        if case .array(let k)? = header["k"], k.count == 3, let e = k[0].stringValue, let r = k[1].stringValue, let u = k[2].stringValue {
            key = .init(event: e, room: r, user: u)
        }
        var window: EmitWindow?
        if case .array(let w)? = header["w"], w.count == 2, let k = w[0].stringValue, let ms = w[1].intValue {
            window = EmitWindow(key: k, windowMs: ms)
        }
        return ClusterEnvelope(
            origin: origin, label: header["l"]?.stringValue ?? "custom", excludeUser: header["x"]?.stringValue,
            skipMembersOf: header["s"]?.stringValue, allowedIn: header["g"]?.stringValue, coalescingKey: key, durable: header["d"]?.boolValue ?? false,
            payload: payload, attachments: attachments, originSID: header["c"]?.stringValue, window: window)
    }
}

extension ClusterEnvelope {
    /// What `publication` from this node, routed by `routing`, travels as.
    package init(origin: String, publication: Publication, routing: Routing) {
        self.init(
            origin: origin, label: publication.label, excludeUser: routing.excludeUser, skipMembersOf: routing.skipMembersOf ?? publication.skipMembersOf,
            allowedIn: routing.allowedIn ?? publication.allowedIn, coalescingKey: publication.coalescingKey, durable: publication.durable, payload: publication.packet, attachments: publication.attachments,
            originSID: publication.origin, window: routing.window)
    }

    /// The event to deliver on this node.
    package var publication: Publication {
        Publication(
            packet: payload, attachments: attachments, label: label, coalescingKey: coalescingKey, durable: durable, origin: originSID,
            skipMembersOf: skipMembersOf, allowedIn: allowedIn)
    }
}
