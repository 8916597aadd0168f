// libFuzzer target: the PROXY protocol parser (v1 text, v2 binary) and the address types it
// and the trusted-proxy logic rely on.
//
// For every input:
//   1. ProxyProtocolHeader.parse never traps; a header's `consumed` is 1…input.count and at
//      most maxHeaderBytes.
//   2. Prefixes agree with the whole (every prefix of a short input, a sample of a long
//      one): a prefix shorter than `consumed` is `.needMoreData` (never an error, never a
//      header); a prefix at least `consumed` long gives the same header and `consumed`. When the whole input is refused or incomplete, no prefix of it
//      is a header.
//   3. Encoders round-trip: a parsed v1 header re-encodes (encodedV1) to bytes that parse to
//      the same header (byte for byte the input for a TCP4 line), and any
//      parsed header re-encodes with encodedV2 to the same header with version v2.
//   4. Headers built from the input's bytes (IPv4 or IPv6 addresses and ports) survive
//      encodedV1 and encodedV2 then parse.
//   5. IPAddress, IPAddressRange and TrustedProxies.clientAddress on the input as text: no
//      trap; a parsed address or range prints to text that parses back to the same value and
//      prints the same again; an untrusted peer's X-Forwarded-For is never believed.

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let input = Array(UnsafeBufferPointer(start: data, count: size))
    checkParse(input)
    if input.count >= 13 { checkBuiltHeader(input) }
    checkAddresses(input)
    return 0
}

private func parse(_ bytes: some Collection<UInt8>) -> Result<ProxyProtocolHeader.ParseResult, ProxyProtocolError> {
    do { return .success(try ProxyProtocolHeader.parse(bytes)) } catch { return .failure(error) }
}

private func checkParse(_ input: [UInt8]) {
    let whole = parse(input)
    var consumed: Int?
    if case .success(.header(let header, let c)) = whole {
        guard c >= 1, c <= input.count, c <= ProxyProtocolHeader.maxHeaderBytes else {
            fatalError("consumed \(c) of \(input.count) bytes: \(input)")
        }
        consumed = c
        checkRoundTrip(header, original: Array(input[0..<c]))
    }
    // Prefix lengths: every one for short inputs, else a sample around the interesting points
    // (the signatures, the v2 fixed part, the v1 bound, the end of the header).
    var lengths: [Int] = []
    if input.count <= 40 {
        lengths = Array(0..<input.count)
    } else {
        lengths = [0, 1, 5, 6, 7, 11, 12, 13, 15, 16, 17, input.count / 2, input.count - 1, ProxyProtocolHeader.maxV1Bytes - 1, ProxyProtocolHeader.maxV1Bytes]
        if let c = consumed { lengths += [c - 2, c - 1, c, c + 1] }
    }
    for n in lengths where n >= 0 && n < input.count {
        let part = parse(input[0..<n])
        if let c = consumed {
            if n < c {
                guard case .success(.needMoreData) = part else {
                    fatalError("prefix \(n) < consumed \(c) gave \(part) for \(input)")
                }
            } else {
                guard part == whole else { fatalError("prefix \(n) gave \(part), whole \(whole) for \(input)") }
            }
        } else if case .success(.header) = part {
            fatalError("prefix \(n) gave \(part) but the whole input gave \(whole) for \(input)")
        }
    }
}

private func checkRoundTrip(_ header: ProxyProtocolHeader, original: [UInt8]) {
    if header.version == .v1 {
        guard let v1 = header.encodedV1() else { fatalError("a parsed v1 header does not encode: \(header)") }
        guard parse(v1) == .success(.header(header, consumed: v1.count)) else {
            fatalError("v1 round trip: \(header) encoded \(v1) parsed \(parse(v1))")
        }
        if original.starts(with: Array("PROXY TCP4 ".utf8)), v1 != original {
            fatalError("TCP4 line re-encoded differently: \(original) vs \(v1)")
        }
    }
    guard let v2 = header.encodedV2() else { fatalError("a parsed header does not encode as v2: \(header)") }
    var expected = header
    expected.version = .v2
    guard parse(v2) == .success(.header(expected, consumed: v2.count)) else {
        fatalError("v2 round trip: \(header) encoded \(v2) parsed \(parse(v2))")
    }
}

private func checkBuiltHeader(_ input: [UInt8]) {
    let v4 = input[0] & 1 == 0
    let width = v4 ? 4 : 16
    guard input.count >= 1 + 2 * width + 4 else { return }
    guard let src = IPAddress(bytes: input[1..<1 + width]), let dst = IPAddress(bytes: input[1 + width..<1 + 2 * width]) else {
        fatalError("IPAddress(bytes:) refused \(width) bytes")
    }
    guard src.bytes == Array(input[1..<1 + width]) else { fatalError("IPAddress.bytes differs: \(src)") }
    let p = 1 + 2 * width
    let sport = UInt16(input[p]) << 8 | UInt16(input[p + 1])
    let dport = UInt16(input[p + 2]) << 8 | UInt16(input[p + 3])
    let header = ProxyProtocolHeader(
        version: .v1, command: .proxy,
        source: .init(address: src, port: sport), destination: .init(address: dst, port: dport))
    checkRoundTrip(header, original: [])
    var local = header
    local.version = .v2
    local.command = .local
    local.source = nil
    local.destination = nil
    guard let bytes = local.encodedV2(), parse(bytes) == .success(.header(local, consumed: bytes.count)) else {
        fatalError("LOCAL round trip failed")
    }
}

/// Loopback, 10/8 and fd00::/8 (the strings are valid; checked on first use).
private let trusted: TrustedProxies = {
    guard let t = try? TrustedProxies(parsing: ["127.0.0.0/8", "10.0.0.0/8", "fd00::/8"]) else { fatalError("harness: trusted ranges") }
    return t
}()

private func checkAddresses(_ input: [UInt8]) {
    guard input.count <= 256 else { return }
    let text = String(decoding: input, as: UTF8.self)
    if let address = IPAddress(text) {
        let printed = address.description
        guard let again = IPAddress(printed), again == address, again.description == printed else {
            fatalError("IPAddress \(text.debugDescription) printed \(printed) which does not parse back")
        }
        guard address.unmapped.unmapped == address.unmapped else { fatalError("unmapped is not idempotent for \(address)") }
    }
    if let range = try? IPAddressRange(parsing: text) {
        guard let again = try? IPAddressRange(parsing: range.description), again == range, range.contains(range.network) else {
            fatalError("IPAddressRange \(text.debugDescription) printed \(range) which does not parse back")
        }
    }
    let peer = IPAddress.v4(0x0A00_0001)
    let client = trusted.clientAddress(peer: peer, forwardedFor: [text])
    // The answer is the peer or an address written in the header, never something else.
    if client != peer, !text.contains(client.description), !text.lowercased().contains(client.description) {
        if case .v6 = client {} else { fatalError("clientAddress invented \(client) from \(text.debugDescription)") }
    }
    let untrusted = IPAddress.v4(0xC000_0201)
    guard trusted.clientAddress(peer: untrusted, forwardedFor: [text]) == untrusted else {
        fatalError("an untrusted peer's X-Forwarded-For was believed: \(text.debugDescription)")
    }
}
