/// permessage-deflate (RFC 7692) negotiation: picks the first acceptable offer of a client's
/// `Sec-WebSocket-Extensions` header and builds the response.
///
/// Relay always answers with `server_no_context_takeover` (so one compressed frame can be
/// written to every recipient) and `client_no_context_takeover` (RFC 7692 §7.1.1.1 lets a server
/// ask for it unasked), so no connection keeps a compression context between messages.
public struct PerMessageDeflateNegotiation: Equatable, Sendable {
    /// The LZ77 window Relay may use when compressing for this client (9…15).
    public var serverMaxWindowBits: Int
    /// The `Sec-WebSocket-Extensions` response value.
    public var responseHeader: String

    /// Returns the agreed parameters, or `nil` if no offer is acceptable (then the connection
    /// goes on uncompressed). `headerValues` are every `Sec-WebSocket-Extensions` header value.
    public static func negotiate(_ headerValues: [String]) -> PerMessageDeflateNegotiation? {
        for offer in headerValues.flatMap(Self.splitOffers) {
            if let agreed = accept(offer) { return agreed }
        }
        return nil
    }

    /// Splits `a; p=1, b` into offers, each a list of `name[=value]` tokens.
    static func splitOffers(_ header: String) -> [[String]] {
        header.split(separator: ",").map { offer in
            offer.split(separator: ";").map { $0.trimmingCharacters(in: " \t") }
        }
    }

    static func accept(_ offer: [String]) -> PerMessageDeflateNegotiation? {
        guard offer.first == "permessage-deflate" else { return nil }
        var seen = Set<String>()
        var serverBits = 15
        for param in offer.dropFirst() {
            let parts = param.split(separator: "=", maxSplits: 1).map { String($0).trimmingCharacters(in: " \t\"") }
            let name = parts[0]
            guard seen.insert(name).inserted else { return nil }  // duplicate parameter
            let value = parts.count == 2 ? parts[1] : nil
            switch name {
            case "server_no_context_takeover", "client_no_context_takeover":
                guard value == nil else { return nil }
            case "server_max_window_bits":
                // zlib cannot honour an 8-bit window reliably: decline such an offer.
                guard let v = value, let bits = Int(v), (9...15).contains(bits) else { return nil }
                serverBits = bits
            case "client_max_window_bits":
                if let v = value { guard let bits = Int(v), (8...15).contains(bits) else { return nil } }
            default:
                return nil
            }
        }
        var response = "permessage-deflate; server_no_context_takeover; client_no_context_takeover"
        if seen.contains("server_max_window_bits") { response += "; server_max_window_bits=\(serverBits)" }
        return PerMessageDeflateNegotiation(serverMaxWindowBits: serverBits, responseHeader: response)
    }
}

extension String {
    fileprivate func trimmingCharacters(in set: String) -> String {
        var s = Substring(self)
        while let f = s.first, set.contains(f) { s.removeFirst() }
        while let l = s.last, set.contains(l) { s.removeLast() }
        return String(s)
    }
}

extension Substring {
    fileprivate func trimmingCharacters(in set: String) -> String { String(self).trimmingCharacters(in: set) }
}
