/// One element of a `Sec-WebSocket-Extensions` header (RFC 6455 §9.1): an extension name and
/// its `;`-separated parameters, each with an optional value.
///
/// The grammar, with the implied optional whitespace of the HTTP list rule:
///
///     extension-list  = 1#extension
///     extension       = extension-token *( ";" extension-param )
///     extension-param = token [ "=" ( token / quoted-string ) ]
///
/// A quoted-string value must be a token after unescaping (RFC 6455 §9.1). Empty list elements
/// (`a, , b`) are skipped, as the list rule requires (RFC 9110 §5.6.1). Anything else that does
/// not match the grammar makes that one element malformed: `parse` returns `nil` in its place and
/// goes on at the next comma outside a quoted string. The parser reads bytes with checked
/// indices only, so no input can trap.
struct WebSocketExtensionOffer: Equatable, Sendable {
    /// One `name[=value]` parameter; `value` is unescaped when it was a quoted-string.
    struct Parameter: Equatable, Sendable {
        var name: String
        var value: String?
    }

    /// A parameter list longer than this makes the element malformed (no real offer comes near).
    static let maxParameters = 16

    var name: String
    var parameters: [Parameter]

    /// Parses one header value into its elements, in order; `nil` marks a malformed element.
    static func parse(_ header: String) -> [WebSocketExtensionOffer?] {
        var scanner = Scanner(bytes: Array(header.utf8))
        var result: [WebSocketExtensionOffer?] = []
        while true {
            scanner.skipWhitespace()
            guard let byte = scanner.peek() else { return result }
            if byte == UInt8(ascii: ",") {  // empty list element
                scanner.advance()
                continue
            }
            if let offer = scanner.element() {
                result.append(offer)
            } else {
                result.append(nil)
                scanner.skipToNextElement()
            }
        }
    }

    /// A byte cursor over one header value.
    private struct Scanner {
        let bytes: [UInt8]
        var index = 0

        init(bytes: [UInt8]) { self.bytes = bytes }

        func peek() -> UInt8? { index < bytes.count ? bytes[index] : nil }

        mutating func advance() { if index < bytes.count { index += 1 } }

        mutating func skipWhitespace() {
            while let b = peek(), b == UInt8(ascii: " ") || b == UInt8(ascii: "\t") { advance() }
        }

        /// `extension` up to (not including) the next top-level `,` or the end; `nil` if
        /// malformed, with the cursor somewhere inside the element.
        mutating func element() -> WebSocketExtensionOffer? {
            guard let name = token() else { return nil }
            var parameters: [Parameter] = []
            while true {
                skipWhitespace()
                guard let b = peek(), b != UInt8(ascii: ",") else {
                    return WebSocketExtensionOffer(name: name, parameters: parameters)
                }
                guard b == UInt8(ascii: ";"), parameters.count < WebSocketExtensionOffer.maxParameters else { return nil }
                advance()
                skipWhitespace()
                guard let parameterName = token() else { return nil }
                skipWhitespace()
                var value: String?
                if peek() == UInt8(ascii: "=") {
                    advance()
                    skipWhitespace()
                    if peek() == UInt8(ascii: "\"") {
                        guard let quoted = quotedToken() else { return nil }
                        value = quoted
                    } else {
                        guard let plain = token() else { return nil }
                        value = plain
                    }
                }
                parameters.append(Parameter(name: parameterName, value: value))
            }
        }

        /// A non-empty run of `tchar`s (RFC 9110 §5.6.2), or `nil` if there is none here.
        mutating func token() -> String? {
            let start = index
            while let b = peek(), Self.isTokenByte(b) { advance() }
            guard index > start else { return nil }
            return String(decoding: bytes[start..<index], as: UTF8.self)  // tchars are ASCII
        }

        /// A quoted-string whose unescaped content is a non-empty token (RFC 6455 §9.1).
        mutating func quotedToken() -> String? {
            advance()  // opening quote
            var content: [UInt8] = []
            while let b = peek() {
                advance()
                switch b {
                case UInt8(ascii: "\""):
                    guard !content.isEmpty, content.allSatisfy(Self.isTokenByte) else { return nil }
                    return String(decoding: content, as: UTF8.self)
                case UInt8(ascii: "\\"):
                    guard let escaped = peek() else { return nil }
                    advance()
                    content.append(escaped)
                default:
                    content.append(b)
                }
            }
            return nil  // unterminated
        }

        /// After a malformed element: moves past the next `,` that is not inside a quoted string
        /// (or to the end).
        mutating func skipToNextElement() {
            var quoted = false
            while let b = peek() {
                advance()
                if quoted {
                    if b == UInt8(ascii: "\\") {
                        advance()
                    } else if b == UInt8(ascii: "\"") {
                        quoted = false
                    }
                } else if b == UInt8(ascii: "\"") {
                    quoted = true
                } else if b == UInt8(ascii: ",") {
                    return
                }
            }
        }

        static func isTokenByte(_ b: UInt8) -> Bool {
            switch b {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"):
                return true
            case UInt8(ascii: "!"), UInt8(ascii: "#"), UInt8(ascii: "$"), UInt8(ascii: "%"), UInt8(ascii: "&"), UInt8(ascii: "'"),
                UInt8(ascii: "*"), UInt8(ascii: "+"), UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "^"), UInt8(ascii: "_"),
                UInt8(ascii: "`"), UInt8(ascii: "|"), UInt8(ascii: "~"):
                return true
            default:
                return false
            }
        }
    }
}
