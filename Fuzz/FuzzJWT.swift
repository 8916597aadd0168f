// libFuzzer target: the JWT parsing RelayServer's TokenVerifier relies on, without keys:
// CompactJWT (structure, header, alg, crit), TokenClaims (sub, exp, nbf, iat, rooms) and the
// strict Base64URL codec.
//
// Each input is used as:
//   1. a token string: CompactJWT.parse, then claims();
//   2. raw header JSON: CompactJWT.algorithm(fromHeader:);
//   3. raw claims JSON: TokenClaims.parse, and the same bytes wrapped in a token with a fixed
//      header, which must give the same result;
//   4. base64url text for Base64URL.decode, and 8 bytes of a Double for the time conversion.
// Invariants:
//   - errors are RelayErrors with a token code the parser documents;
//   - an accepted header has a string alg that is not `none` in any case, and no `crit`;
//   - accepted claims meet the bounds: sub a non-empty NFC identifier of ≤ 256 bytes without
//     control characters; exp, nbf, iat within ±2^53 (so within Int64); at most 1000 rooms, each
//     an NFC identifier of ≤ 256 bytes; and the claims, written back as JSON, parse to themselves;
//   - Base64URL is canonical: whatever decodes re-encodes to the same text, and encode∘decode
//     is the identity on bytes;
//   - TokenClaims.seconds never returns a value out of ±2^53, and returns the rounded value.

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    checkToken(String(decoding: bytes, as: UTF8.self))
    checkHeader(bytes)
    checkClaims(bytes)
    checkBase64(bytes)
    checkSeconds(bytes)
    return 0
}

private let parseCodes: Set<RelayErrorCode> = [.tokenMissing, .tokenMalformed, .tokenAlgNone]
private let claimCodes: Set<RelayErrorCode> = [.tokenMalformed, .tokenInvalidClaims]

private func checkToken(_ token: String) {
    let jwt: CompactJWT
    do {
        jwt = try CompactJWT.parse(token)
    } catch {
        guard parseCodes.contains(error.code) else { fatalError("parse threw \(error) for \(token.debugDescription)") }
        return
    }
    checkAcceptedHeader(jwt.header, alg: jwt.algorithm, input: token)
    guard token.utf8.count <= CompactJWT.maxTokenBytes, token.utf8.filter({ $0 == UInt8(ascii: ".") }).count == 2 else {
        fatalError("parse accepted a token of the wrong shape: \(token.debugDescription)")
    }
    do {
        checkAcceptedClaims(try jwt.claims(), input: token)
    } catch {
        guard claimCodes.contains(error.code) else { fatalError("claims() threw \(error) for \(token.debugDescription)") }
    }
}

private func checkHeader(_ bytes: [UInt8]) {
    do {
        let alg = try CompactJWT.algorithm(fromHeader: bytes)
        guard let header = try? JSONParser.parse(bytes) else { fatalError("accepted a header that is not JSON: \(show(bytes))") }
        checkAcceptedHeader(header, alg: alg, input: show(bytes))
    } catch {
        guard parseCodes.contains(error.code), error.code != .tokenMissing else { fatalError("header threw \(error) for \(show(bytes))") }
    }
}

private func checkAcceptedHeader(_ header: JSONValue, alg: String, input: String) {
    guard header.isObject, header["alg"] == .string(alg), header["crit"] == nil,
        alg.utf8.map({ (0x41...0x5A).contains($0) ? $0 | 0x20 : $0 }) != Array("none".utf8)
    else {
        fatalError("accepted header \(header) (alg \(alg.debugDescription)) from \(input.debugDescription)")
    }
}

private func checkClaims(_ bytes: [UInt8]) {
    let direct: Result<TokenClaims, RelayError>
    do {
        direct = .success(try TokenClaims.parse(bytes))
    } catch {
        guard claimCodes.contains(error.code) else { fatalError("TokenClaims.parse threw \(error) for \(show(bytes))") }
        direct = .failure(error)
    }
    if case .success(let claims) = direct { checkAcceptedClaims(claims, input: show(bytes)) }
    // The same payload inside a token: same claims, or an error with the same code.
    let token = Base64URL.encode(Array(#"{"alg":"HS256"}"#.utf8)) + "." + Base64URL.encode(bytes) + ".c2ln"
    guard token.utf8.count <= CompactJWT.maxTokenBytes else { return }
    guard let jwt = try? CompactJWT.parse(token) else { fatalError("fixed header refused for \(show(bytes))") }
    let wrapped: Result<TokenClaims, RelayError>
    do {
        wrapped = .success(try jwt.claims())
    } catch {
        wrapped = .failure(error)
    }
    switch (direct, wrapped) {
    case (.success(let a), .success(let b)) where a == b: break
    case (.failure(let a), .failure(let b)) where a.code == b.code: break
    default: fatalError("claims differ inside a token: \(direct) vs \(wrapped) for \(show(bytes))")
    }
}

private func isIdentifier(_ s: String, maxBytes: Int) -> Bool {
    !s.isEmpty && s.utf8.count <= maxBytes && Array(s.utf8) == s._nfcCodeUnits
        && s.unicodeScalars.allSatisfy { !($0.value < 0x20 || (0x7F...0x9F).contains($0.value)) }
}

private func checkAcceptedClaims(_ claims: TokenClaims, input: String) {
    let limit = TokenClaims.maxTimeMagnitude
    let times = [claims.expiresAt] + [claims.notBefore, claims.issuedAt].compactMap { $0 }
    guard isIdentifier(claims.subject, maxBytes: 256), times.allSatisfy({ (-limit...limit).contains($0) }) else {
        fatalError("accepted claims out of bounds: \(claims) from \(input.debugDescription)")
    }
    if let rooms = claims.rooms {
        guard rooms.count <= 1000, rooms.allSatisfy({ isIdentifier($0, maxBytes: 256) }) else {
            fatalError("accepted rooms out of bounds: \(rooms.count) \(rooms.prefix(3)) from \(input.debugDescription)")
        }
    }
    // Written back as JSON (integers), the claims parse to themselves.
    var fields: [(String, JSONValue)] = [("sub", .string(claims.subject)), ("exp", .int(claims.expiresAt))]
    if let nbf = claims.notBefore { fields.append(("nbf", .int(nbf))) }
    if let iat = claims.issuedAt { fields.append(("iat", .int(iat))) }
    if let rooms = claims.rooms { fields.append(("rooms", .array(rooms.map(JSONValue.string)))) }
    guard let again = try? TokenClaims.parse(JSONWriter.bytes(.object(fields))), again == claims else {
        fatalError("claims do not round-trip: \(claims) from \(input.debugDescription)")
    }
    // The time checks take any clock and leeway without overflowing.
    for (now, leeway) in [(Int64.max, Int64.max), (Int64.min, Int64.max), (0, 0), (claims.expiresAt, Int64.min)] {
        _ = claims.isExpired(now: now, leeway: leeway)
        _ = claims.isNotYetValid(now: now, leeway: leeway)
    }
}

private func checkBase64(_ bytes: [UInt8]) {
    if let decoded = Base64URL.decode(bytes) {
        guard Array(Base64URL.encode(decoded).utf8) == bytes else { fatalError("Base64URL is not canonical for \(show(bytes))") }
    }
    guard Base64URL.decode(Array(Base64URL.encode(bytes).utf8), maxInputBytes: .max) == bytes else {
        fatalError("Base64URL encode/decode round trip failed for \(show(bytes))")
    }
}

private func checkSeconds(_ bytes: [UInt8]) {
    guard bytes.count >= 8 else { return }
    let bits = bytes.prefix(8).reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
    let d = Double(bitPattern: bits)
    for rule in [FloatingPointRoundingRule.down, .up] {
        guard let s = TokenClaims.seconds(d, rounding: rule) else { continue }
        guard (-TokenClaims.maxTimeMagnitude...TokenClaims.maxTimeMagnitude).contains(s), Double(s) == d.rounded(rule) else {
            fatalError("seconds(\(d), \(rule)) = \(s)")
        }
    }
}

private func show(_ bytes: [UInt8]) -> String {
    let shown = bytes.prefix(512)
    let text = String(decoding: shown, as: UTF8.self).debugDescription
    return bytes.count > shown.count ? "\(text)… (\(bytes.count) bytes)" : text
}
