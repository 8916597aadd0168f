import Crypto
import Foundation
import NIOCore
import NIOHTTP1
import NIOWebSocket

/// The WebSocket upgrade as NIO's `NIOWebSocketServerUpgrader` answers it — one
/// `Sec-WebSocket-Key`, `Sec-WebSocket-Version: 13`, the caller's `shouldUpgrade`, the
/// `Sec-WebSocket-Accept` hash, the same errors — without the handlers NIO's adds before the
/// caller's: its frame encoder (which keeps a header buffer per socket and cannot be removed)
/// and its decoder inside a `ByteToMessageHandler`. The caller's `upgradePipelineHandler` adds
/// the socket's whole WebSocket pipeline (`WebSocketFrameCodec` and what follows it).
final class WebSocketUpgrader: HTTPServerProtocolUpgrader, Sendable {
    let supportedProtocol = "websocket"
    let requiredUpgradeHeaders: [String] = []

    private let shouldUpgrade: @Sendable (any Channel, HTTPRequestHead) -> EventLoopFuture<HTTPHeaders?>
    private let upgradePipelineHandler: @Sendable (any Channel, HTTPRequestHead) -> EventLoopFuture<Void>

    /// RFC 6455 §1.3.
    private static let magicGUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"

    init(
        shouldUpgrade: @escaping @Sendable (any Channel, HTTPRequestHead) -> EventLoopFuture<HTTPHeaders?>,
        upgradePipelineHandler: @escaping @Sendable (any Channel, HTTPRequestHead) -> EventLoopFuture<Void>
    ) {
        self.shouldUpgrade = shouldUpgrade
        self.upgradePipelineHandler = upgradePipelineHandler
    }

    func buildUpgradeResponse(channel: any Channel, upgradeRequest: HTTPRequestHead, initialResponseHeaders: HTTPHeaders) -> EventLoopFuture<HTTPHeaders> {
        let keys = upgradeRequest.headers[canonicalForm: "Sec-WebSocket-Key"]
        let versions = upgradeRequest.headers[canonicalForm: "Sec-WebSocket-Version"]
        guard keys.count == 1, let key = keys.first, versions.count == 1, versions.first == "13" else {
            return channel.eventLoop.makeFailedFuture(NIOWebSocketUpgradeError.invalidUpgradeHeader)
        }
        let accept = Self.acceptValue(key: String(key))
        return shouldUpgrade(channel, upgradeRequest).flatMapThrowing { extraHeaders in
            guard var headers = extraHeaders else { throw NIOWebSocketUpgradeError.unsupportedWebSocketTarget }
            headers.replaceOrAdd(name: "Upgrade", value: "websocket")
            headers.add(name: "Sec-WebSocket-Accept", value: accept)
            headers.replaceOrAdd(name: "Connection", value: "upgrade")
            return headers
        }
    }

    func upgrade(context: ChannelHandlerContext, upgradeRequest: HTTPRequestHead) -> EventLoopFuture<Void> {
        upgradePipelineHandler(context.channel, upgradeRequest)
    }

    /// `Sec-WebSocket-Accept` for `key`: base64 of the SHA-1 of the key and the GUID.
    static func acceptValue(key: String) -> String {
        Data(Insecure.SHA1.hash(data: Data((key + magicGUID).utf8))).base64EncodedString()
    }
}
