import NIOCore
import NIOHTTP1
import RelayCore

/// A complete HTTP response to write.
struct HTTPResponse {
    var status: HTTPResponseStatus
    var contentType: String
    var body: [UInt8]
    var extraHeaders: [(String, String)] = []
    /// A server-sent-events stream: `body` is sent first, then `stream.chunk()` every
    /// `stream.interval` until the client goes away.
    var stream: EventStream?

    struct EventStream {
        var interval: TimeAmount
        var chunk: @Sendable () -> [UInt8]
    }

    static func json(_ status: HTTPResponseStatus, _ value: JSONValue) -> HTTPResponse {
        HTTPResponse(status: status, contentType: "application/json", body: JSONWriter.bytes(value))
    }

    /// `{"error":{"code","message"}}`.
    static func error(_ status: HTTPResponseStatus, code: String, message: String) -> HTTPResponse {
        json(status, .object([("error", .object([("code", .string(code)), ("message", .string(message))]))]))
    }

    static func text(_ status: HTTPResponseStatus, _ text: String, contentType: String = "text/plain; charset=utf-8") -> HTTPResponse {
        HTTPResponse(status: status, contentType: contentType, body: Array(text.utf8))
    }
}
