import Foundation
import NIOHTTP1
import RelayCore

/// What the WebSocket upgrade request told us about the client.
public struct HandshakeInfo: Sendable, Equatable {
    public var remoteIP: String
    /// `token` from the query string, if any.
    public var queryToken: String?
    /// The `Authorization: Bearer` token, if any.
    public var bearerToken: String?
    /// permessage-deflate parameters, when negotiated.
    public var deflate: PerMessageDeflateNegotiation?

    public init(remoteIP: String, queryToken: String? = nil, bearerToken: String? = nil, deflate: PerMessageDeflateNegotiation? = nil) {
        self.remoteIP = remoteIP
        self.queryToken = queryToken
        self.bearerToken = bearerToken
        self.deflate = deflate
    }

    init(request: HTTPRequestHead, remoteIP: String, deflateEnabled: Bool) {
        let query = QueryString(uri: request.uri)
        self.init(
            remoteIP: remoteIP, queryToken: query["token"], bearerToken: BearerToken.from(request.headers),
            deflate: deflateEnabled ? PerMessageDeflateNegotiation.negotiate(request.headers["sec-websocket-extensions"]) : nil)
    }
}

/// Reads `Authorization: Bearer <token>`.
enum BearerToken {
    static func from(_ headers: HTTPHeaders) -> String? {
        guard let value = headers.first(name: "authorization") else { return nil }
        let parts = value.split(separator: " ", maxSplits: 1)
        guard parts.count == 2, parts[0].lowercased() == "bearer" else { return nil }
        return String(parts[1]).trimmingCharacters(in: .whitespaces)
    }
}

// `QueryString` lives in RelayCore (Sources/RelayCore/Protocol/QueryString.swift), where it is
// unit-tested and fuzzed.
