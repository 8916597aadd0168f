/// A compact JWS (RFC 7515 §7.1), `header.payload.signature`, taken apart without verifying
/// the signature. Pure parsing, so it can be fuzzed; `TokenVerifier` in RelayServer checks the
/// signature with jwt-kit in between `parse` and `claims()`.
///
/// What `parse` refuses, and with which code:
/// - an empty token: `token_missing`;
/// - more than `maxTokenBytes` bytes, not exactly three `.`-separated parts, a header or
///   signature that is not strict unpadded base64url (see `Base64URL`), a header that is not a
///   JSON object (duplicate keys included), a missing or non-string `alg`: `token_malformed`;
/// - `alg` equal to `none` in any ASCII letter case: `token_alg_none`;
/// - any `crit` header parameter: `token_malformed`. `crit` lists extensions the recipient must
///   understand or else reject the token (RFC 7515 §4.1.11), and Relay understands none.
///
/// `claims()` then decodes the payload (`token_malformed` if it is not base64url or not a JSON
/// object) and reads it with `TokenClaims(json:)`.
public struct CompactJWT: Sendable, Equatable {
    /// Longer tokens are refused before anything is decoded.
    public static let maxTokenBytes = 8192

    /// The header's `alg`. Not checked against any configuration here.
    public let algorithm: String
    /// The decoded header.
    public let header: JSONValue
    /// The payload exactly as it appears in the token (base64url bytes, not decoded yet).
    public let encodedPayload: [UInt8]

    /// Splits and checks `token` and reads its header.
    public static func parse(_ token: String) throws(RelayError) -> CompactJWT {
        let utf8 = token.utf8
        guard !utf8.isEmpty else { throw RelayError(.tokenMissing) }
        guard utf8.count <= maxTokenBytes else { throw RelayError(.tokenMalformed, "token too long") }
        // Split on the byte, as jwt-kit does (a Character split would not split `.` + U+0301).
        let parts = utf8.split(separator: UInt8(ascii: "."), maxSplits: 3, omittingEmptySubsequences: false)
        guard parts.count == 3, let headerPart = parts.first, let signaturePart = parts.last else {
            throw RelayError(.tokenMalformed, "a token has three parts separated by dots")
        }
        guard let headerBytes = Base64URL.decode(headerPart) else {
            throw RelayError(.tokenMalformed, "token header is not base64url")
        }
        let header = try parseHeader(headerBytes)
        let algorithm = try algorithm(of: header)
        guard Base64URL.decode(signaturePart) != nil else {
            throw RelayError(.tokenMalformed, "token signature is not base64url")
        }
        return CompactJWT(algorithm: algorithm, header: header, encodedPayload: Array(parts[1]))
    }

    /// Parses a decoded header and returns its `alg`, with the checks and codes of `parse`.
    public static func algorithm(fromHeader bytes: [UInt8]) throws(RelayError) -> String {
        try algorithm(of: try parseHeader(bytes))
    }

    /// Decodes the payload and reads the claims Relay uses (see `TokenClaims`).
    public func claims() throws(RelayError) -> TokenClaims {
        guard let bytes = Base64URL.decode(encodedPayload) else {
            throw RelayError(.tokenMalformed, "token payload is not base64url")
        }
        return try TokenClaims.parse(bytes)
    }

    private static func parseHeader(_ bytes: [UInt8]) throws(RelayError) -> JSONValue {
        guard let header = try? JSONParser.parse(bytes), header.isObject else {
            throw RelayError(.tokenMalformed, "token header is not a JSON object")
        }
        return header
    }

    private static func algorithm(of header: JSONValue) throws(RelayError) -> String {
        guard case .string(let alg)? = header["alg"] else { throw RelayError(.tokenMalformed, "token header has no alg") }
        if isNone(alg) { throw RelayError(.tokenAlgNone) }
        if header["crit"] != nil {
            throw RelayError(.tokenMalformed, "token header lists critical extensions (crit); none are supported")
        }
        return alg
    }

    /// `none` in any ASCII case.
    private static func isNone(_ alg: String) -> Bool {
        let lowered = alg.utf8.map { (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains($0) ? $0 | 0x20 : $0 }
        return lowered.elementsEqual("none".utf8)
    }
}
