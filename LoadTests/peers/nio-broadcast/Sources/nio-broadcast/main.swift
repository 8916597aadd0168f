import NIOCore
import NIOHTTP1
import NIOPosix
import NIOWebSocket

// usage: nio-broadcast PORT [THREADS]   (listens on 127.0.0.1 only; THREADS event loops, default 1)

/// The members of each room, per event loop: a loop's sockets are only touched on that loop.
/// A frame for a member on another loop is handed over once per loop and event.
final class LoopRooms {
    var rooms: [String: [BroadcastHandler]] = [:]
}

/// Every loop's `LoopRooms`, fixed at start; each is only touched on its own loop.
/// (`@unchecked Sendable`: the table never changes after start; entry i is only used on loop i.)
final class AllRooms: @unchecked Sendable {
    let loops: [any EventLoop]
    let tables: [LoopRooms]
    init(loops: [any EventLoop]) {
        self.loops = loops
        self.tables = loops.map { _ in LoopRooms() }
    }
    func index(of loop: any EventLoop) -> Int {
        loops.firstIndex { $0 === loop } ?? 0
    }
}

final class BroadcastHandler: ChannelInboundHandler {
    typealias InboundIn = WebSocketFrame
    typealias OutboundOut = WebSocketFrame

    let all: AllRooms
    var context: ChannelHandlerContext?
    var room: String?
    var loopIndex = 0

    init(all: AllRooms) { self.all = all }

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
        loopIndex = all.index(of: context.eventLoop)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let frame = unwrapInboundIn(data)
        switch frame.opcode {
        case .text:
            let text = frame.unmaskedData
            handle(text: text, context: context)
        case .connectionClose:
            context.close(promise: nil)
        case .ping:
            let pong = WebSocketFrame(fin: true, opcode: .pong, data: frame.unmaskedData)
            context.writeAndFlush(wrapOutboundOut(pong), promise: nil)
        default:
            break
        }
    }

    private func handle(text: ByteBuffer, context: ChannelHandlerContext) {
        if let join = Self.stringValue(of: Self.joinKey, in: text) {
            room = join
            all.tables[loopIndex].rooms[join, default: []].append(self)
            return
        }
        guard let target = Self.stringValue(of: Self.roomKey, in: text) else { return }
        // One frame, the same bytes to every member; other loops get one hand-off each.
        let out = WebSocketFrame(fin: true, opcode: .text, data: text)
        for (i, loop) in all.loops.enumerated() {
            if i == loopIndex {
                Self.send(out, to: all.tables[i].rooms[target], except: self)
            } else {
                let table = all.tables[i]
                let me = ObjectIdentifier(self)
                // Only read on its own loop, inside this task (see AllRooms).
                nonisolated(unsafe) let t = table
                loop.execute {
                    Self.send(out, to: t.rooms[target], exceptID: me)
                }
            }
        }
    }

    private static func send(_ frame: WebSocketFrame, to members: [BroadcastHandler]?, except: BroadcastHandler) {
        send(frame, to: members, exceptID: ObjectIdentifier(except))
    }

    private static func send(_ frame: WebSocketFrame, to members: [BroadcastHandler]?, exceptID: ObjectIdentifier) {
        guard let members else { return }
        for m in members where ObjectIdentifier(m) != exceptID {
            m.context?.writeAndFlush(NIOAny(frame), promise: nil)
        }
    }

    func channelInactive(context: ChannelHandlerContext) {
        if let room {
            all.tables[loopIndex].rooms[room]?.removeAll { $0 === self }
        }
        self.context = nil
        context.fireChannelInactive()
    }

    private static let joinKey = Array("\"join\":\"".utf8)
    private static let roomKey = Array("\"room\":\"".utf8)

    /// The string value of `"key":"…"` in a flat JSON object (no escapes needed by the probe),
    /// found in the frame's bytes in place: this peer is the floor, so it copies nothing it
    /// does not send.
    static func stringValue(of needle: [UInt8], in buffer: ByteBuffer) -> String? {
        buffer.withUnsafeReadableBytes { hay -> String? in
            guard hay.count >= needle.count else { return nil }
            var i = 0
            outer: while i + needle.count <= hay.count {
                for j in 0..<needle.count where hay[i + j] != needle[j] {
                    i += 1
                    continue outer
                }
                let start = i + needle.count
                var end = start
                while end < hay.count, hay[end] != UInt8(ascii: "\"") { end += 1 }
                return String(decoding: UnsafeRawBufferPointer(rebasing: hay[start..<end]), as: UTF8.self)
            }
            return nil
        }
    }
}

let args = CommandLine.arguments
let port = args.count > 1 ? Int(args[1]) ?? 8082 : 8082
let threads = args.count > 2 ? max(1, Int(args[2]) ?? 1) : 1
let group = MultiThreadedEventLoopGroup(numberOfThreads: threads)
var loops: [any EventLoop] = []
for loop in group.makeIterator() { loops.append(loop) }
let all = AllRooms(loops: loops)

let upgrader = NIOWebSocketServerUpgrader(
    maxFrameSize: 1 << 16,
    shouldUpgrade: { channel, _ in channel.eventLoop.makeSucceededFuture(HTTPHeaders()) },
    upgradePipelineHandler: { channel, _ in
        channel.eventLoop.makeCompletedFuture {
            try channel.pipeline.syncOperations.addHandler(BroadcastHandler(all: all))
        }
    })

let bootstrap = ServerBootstrap(group: group)
    .serverChannelOption(.backlog, value: 4096)
    .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
    .childChannelOption(.socketOption(.tcp_nodelay), value: 1)
    .childChannelInitializer { channel in
        channel.eventLoop.makeCompletedFuture {
            try channel.pipeline.syncOperations.configureHTTPServerPipeline(
                withServerUpgrade: (upgraders: [upgrader], completionHandler: { _ in }))
        }
    }

let server = try bootstrap.bind(host: "127.0.0.1", port: port).wait()
print("nio-broadcast listening on 127.0.0.1:\(port), \(threads) loop(s)")
try server.closeFuture.wait()
