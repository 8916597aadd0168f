/// permessage-deflate (RFC 7692) negotiation: picks the first acceptable offer of a client's
/// `Sec-WebSocket-Extensions` header and builds the response.
///
/// Relay always answers with `server_no_context_takeover` (so one compressed frame can be
/// written to every recipient) and `client_no_context_takeover` (RFC 7692 §7.1.1.1 lets a server
/// ask for it unasked), so no connection keeps a compression context between messages.
///
/// The header is read by `WebSocketExtensionOffer`, a tokenizer for the RFC 6455 §9.1 grammar.
/// A malformed offer, an unknown or repeated parameter or an out-of-range value makes that offer
/// unacceptable; negotiation then goes on with the next offer. No input traps.
public struct PerMessageDeflateNegotiation: Equatable, Sendable {
    /// The LZ77 window Relay may use when compressing for this client (9…15).
    public var serverMaxWindowBits: Int
    /// The `Sec-WebSocket-Extensions` response value.
    public var responseHeader: String

    /// Returns the agreed parameters, or `nil` if no offer is acceptable (then the connection
    /// goes on uncompressed). `headerValues` are every `Sec-WebSocket-Extensions` header value.
    public static func negotiate(_ headerValues: [String]) -> PerMessageDeflateNegotiation? {
        for header in headerValues {
            for case let offer? in WebSocketExtensionOffer.parse(header) {
                if let agreed = accept(offer) { return agreed }
            }
        }
        return nil
    }

    /// The agreement for one well-formed offer, or `nil` if Relay cannot accept it.
    static func accept(_ offer: WebSocketExtensionOffer) -> PerMessageDeflateNegotiation? {
        guard offer.name == "permessage-deflate" else { return nil }
        var seen = Set<String>()
        var serverBits = 15
        for parameter in offer.parameters {
            guard seen.insert(parameter.name).inserted else { return nil }  // duplicate parameter
            switch parameter.name {
            case "server_no_context_takeover", "client_no_context_takeover":
                guard parameter.value == nil else { return nil }
            case "server_max_window_bits":
                // zlib cannot honour an 8-bit window reliably: decline such an offer.
                guard let bits = parameter.value.flatMap(windowBits), (9...15).contains(bits) else { return nil }
                serverBits = bits
            case "client_max_window_bits":
                // A bare `client_max_window_bits` only says the client supports the parameter.
                if let value = parameter.value {
                    guard let bits = windowBits(value), (8...15).contains(bits) else { return nil }
                }
            default:
                return nil
            }
        }
        var response = "permessage-deflate; server_no_context_takeover; client_no_context_takeover"
        if seen.contains("server_max_window_bits") { response += "; server_max_window_bits=\(serverBits)" }
        return PerMessageDeflateNegotiation(serverMaxWindowBits: serverBits, responseHeader: response)
    }

    /// A window-bits value: a decimal integer without leading zeros (RFC 7692 §7.1.2), at most
    /// two digits so no value can overflow.
    static func windowBits(_ value: String) -> Int? {
        let digits = Array(value.utf8)
        guard (1...2).contains(digits.count), digits.allSatisfy({ (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) }) else {
            return nil
        }
        guard digits.count == 1 || digits[0] != UInt8(ascii: "0") else { return nil }
        return digits.reduce(0) { $0 * 10 + Int($1 - UInt8(ascii: "0")) }
    }
}
