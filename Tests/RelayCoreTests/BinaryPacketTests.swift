import RelayTestSupport
import XCTest
@testable import RelayCore

private func bytes(_ text: String) -> ArraySlice<UInt8> { ArraySlice(text.utf8) }
private func text(_ bytes: [UInt8]) -> String { String(decoding: bytes, as: UTF8.self) }
private let p0 = #"{"_placeholder":true,"num":0}"#
private let p1 = #"{"_placeholder":true,"num":1}"#

final class BinaryHeaderDecodingTests: XCTestCase {
    private func decode(_ text: String, maxAttachments: Int = SocketPacket.defaultMaxAttachments, file: StaticString = #filePath, line: UInt = #line)
        -> SocketPacket?
    {
        do { return try SocketPacket.decode(bytes(text), maxAttachments: maxAttachments) } catch {
            XCTFail("unexpected \(error) for \(text)", file: file, line: line)
            return nil
        }
    }

    private func assertError(
        _ text: String, _ expected: ProtocolError, maxAttachments: Int = SocketPacket.defaultMaxAttachments,
        file: StaticString = #filePath, line: UInt = #line
    ) {
        do {
            let packet = try SocketPacket.decode(bytes(text), maxAttachments: maxAttachments)
            XCTFail("expected \(expected), decoded \(packet)", file: file, line: line)
        } catch {
            XCTAssertEqual(error, expected, file: file, line: line)
        }
    }

    // MARK: Grammar examples of the Socket.IO v5 protocol document

    func testProtocolDocumentExamples() {
        XCTAssertEqual(
            decode(#"51-["hello",{"_placeholder":true,"num":0}]"#),
            SocketPacket(type: .binaryEvent, data: ["hello", BinaryPlaceholder.json(0)], attachmentCount: 1))
        XCTAssertEqual(
            decode(#"51-/admin,["project:delete",{"_placeholder":true,"num":0}]"#),
            SocketPacket(type: .binaryEvent, namespace: "/admin", data: ["project:delete", BinaryPlaceholder.json(0)], attachmentCount: 1))
        XCTAssertEqual(
            decode(#"61-/admin,456[{"_placeholder":true,"num":0}]"#),
            SocketPacket(type: .binaryAck, namespace: "/admin", ackID: 456, data: [BinaryPlaceholder.json(0)], attachmentCount: 1))
        XCTAssertEqual(
            decode(#"52-12["a:b",{"x":{"_placeholder":true,"num":1},"y":[{"_placeholder":true,"num":0}]}]"#),
            SocketPacket(
                type: .binaryEvent, ackID: 12,
                data: ["a:b", .object([("x", BinaryPlaceholder.json(1)), ("y", [BinaryPlaceholder.json(0)])])], attachmentCount: 2))
    }

    // MARK: The attachment count

    func testCountGrammar() {
        XCTAssertEqual(decode(#"50-["a:b",{}]"#)?.attachmentCount, 0)
        XCTAssertEqual(decode(#"60-1[]"#), SocketPacket(type: .binaryAck, ackID: 1, data: [], attachmentCount: 0))
        for bad in [#"5-["a:b"]"#, #"501-["a:b",{"_placeholder":true,"num":0}]"#, #"5a-["a:b"]"#, #"51["a:b"]"#, "51", "5", "5-", #"5+1-["a:b"]"#, #"5 1-["a:b"]"#, "6-1[]"] {
            assertError(bad, .invalidAttachmentCount)
        }
    }

    func testCountLimit() {
        let ten = (0..<10).map { #"{"_placeholder":true,"num":\#($0)}"# }.joined(separator: ",")
        XCTAssertEqual(decode(#"510-["a:b",[\#(ten)]]"#)?.attachmentCount, 10)
        assertError(#"511-["a:b"]"#, .tooManyAttachments(limit: 10))
        assertError(#"62-1[]"#, .tooManyAttachments(limit: 1), maxAttachments: 1)
        XCTAssertEqual(decode(#"52-["a:b",[\#(p0),\#(p1)]]"#, maxAttachments: 2)?.attachmentCount, 2)
        assertError("5" + String(repeating: "9", count: 40) + #"-["a:b"]"#, .tooManyAttachments(limit: 10))
        assertError(#"5999999999-["a:b"]"#, .tooManyAttachments(limit: 10))
        assertError(#"51-["a:b",{"_placeholder":true,"num":0}]"#, .tooManyAttachments(limit: 0), maxAttachments: 0)
    }

    // MARK: Placeholders

    func testPlaceholderNumbering() {
        assertError(#"52-["a:b",\#(p0),\#(p0)]"#, .invalidPlaceholder(.duplicate(num: 0), ackID: nil))
        assertError(#"51-7["a:b",\#(p1)]"#, .invalidPlaceholder(.outOfRange(num: 1, count: 1), ackID: 7))
        assertError(#"51-["a:b",{"_placeholder":true,"num":-1}]"#, .invalidPlaceholder(.outOfRange(num: -1, count: 1), ackID: nil))
        assertError(#"52-["a:b",\#(p1)]"#, .invalidPlaceholder(.missing(num: 0), ackID: nil))
        assertError(#"52-3["a:b",\#(p0)]"#, .invalidPlaceholder(.missing(num: 1), ackID: 3))
        assertError(#"51-["a:b",{}]"#, .invalidPlaceholder(.missing(num: 0), ackID: nil))
        // A placeholder where none was announced.
        assertError(#"50-["a:b",\#(p0)]"#, .invalidPlaceholder(.outOfRange(num: 0, count: 0), ackID: nil))
        // Order of the placeholders in the JSON does not matter, nor the order of their keys.
        XCTAssertNotNil(decode(#"52-["a:b",\#(p1),{"num":0,"_placeholder":true}]"#))
    }

    func testPlaceholderStructure() {
        let malformed: [String] = [
            #"{"_placeholder":true,"num":0,"x":1}"#,  // something riding along
            #"{"_placeholder":true}"#,
            #"{"_placeholder":false,"num":0}"#,
            #"{"_placeholder":"true","num":0}"#,
            #"{"_placeholder":1,"num":0}"#,
            #"{"_placeholder":true,"num":"0"}"#,
            #"{"_placeholder":true,"num":0.5}"#,
            #"{"_placeholder":true,"num":0.0}"#,
            #"{"_placeholder":true,"num":1e0}"#,
            #"{"_placeholder":true,"num":null}"#,
            #"{"_placeholder":true,"Num":0}"#,
            #"{"_placeholder":null}"#,
            #"{"_placeholder":true,"num":{"_placeholder":true,"num":0}}"#,
        ]
        for m in malformed {
            assertError(#"51-["a:b",\#(m)]"#, .invalidPlaceholder(.malformed, ackID: nil))
            assertError(#"51-["a:b",\#(p0),\#(m)]"#, .invalidPlaceholder(.malformed, ackID: nil))
        }
    }

    func testPlaceholdersAnywhere() {
        let deep = String(repeating: #"{"k":["#, count: 10) + p0 + String(repeating: "]}", count: 10)
        XCTAssertNotNil(decode(#"51-["a:b",\#(deep)]"#))
        XCTAssertNotNil(decode(#"51-[\#(p0)]"#))  // even as the event name: InboundEvent refuses it later
        XCTAssertNotNil(decode(#"52-["a:b",{"room":"r"},\#(p0),[1,\#(p1)]]"#))
    }

    func testPlaceholdersInTextPacketsArePlainJSON() {
        XCTAssertEqual(decode(#"2["a:b",\#(p1),\#(p1)]"#)?.data, ["a:b", BinaryPlaceholder.json(1), BinaryPlaceholder.json(1)])
        XCTAssertEqual(decode(#"3["a:b",{"_placeholder":5}]"#)?.attachmentCount, 0)
    }

    // MARK: Shape

    func testBinaryDataIsAnArray() {
        let shape = ProtocolError.invalidPayload("a binary packet's data is a JSON array")
        assertError("50-", shape)
        assertError("51-", shape)
        assertError(#"51-\#(p0)"#, shape)
        assertError(#"50-"a:b""#, shape)
        assertError(#"60-3{}"#, shape)
        assertError("61-/admin,3", shape)
    }

    func testBinaryAckNeedsAnID() {
        assertError(#"61-[\#(p0)]"#, .invalidAckID)
        assertError(#"61-/admin,[\#(p0)]"#, .invalidAckID)
    }

    func testOtherErrorsKeepTheirMeaning() {
        assertError(#"51-["a:b",\#(p0)"#, .invalidJSON(.unexpectedEnd))
        assertError(#"51-["a:b",{"a":1,"a":2},\#(p0)]"#, .duplicateKey(ackID: nil))
        assertError(#"51-4["a:b",5,\#(p0)]x"#, .invalidJSON(.trailingBytes(offset: 39)))
        assertError(#"51-1234567890123456[\#(p0)]"#, .invalidAckID)
        assertError(#"51-/\#(String(repeating: "n", count: 200)),[\#(p0)]"#, .invalidNamespace)
    }

    // MARK: Encoding

    func testEncodedHeaders() {
        let event = SocketPacket(type: .binaryEvent, data: ["a:b", BinaryPlaceholder.json(0)], attachmentCount: 1)
        XCTAssertEqual(text(event.encodedMessage()), #"451-["a:b",{"_placeholder":true,"num":0}]"#)
        let ack = SocketPacket(type: .binaryAck, namespace: "/admin", ackID: 456, data: [BinaryPlaceholder.json(0)], attachmentCount: 1)
        XCTAssertEqual(text(ack.encodedMessage()), #"461-/admin,456[{"_placeholder":true,"num":0}]"#)
        XCTAssertEqual(text(SocketPacket(type: .binaryEvent, ackID: 0, data: ["a:b"]).encodedMessage()), #"450-0["a:b"]"#)
        // The count is not written for the other types.
        XCTAssertEqual(text(SocketPacket(type: .event, data: ["a:b"], attachmentCount: 3).encodedMessage()), #"42["a:b"]"#)
    }

    func testHeaderRoundTrip() throws {
        for packet in [
            SocketPacket(type: .binaryEvent, data: ["a:b", BinaryPlaceholder.json(0)], attachmentCount: 1),
            SocketPacket(type: .binaryEvent, namespace: "/x", ackID: 99, data: ["a:b", [BinaryPlaceholder.json(1), BinaryPlaceholder.json(0)]], attachmentCount: 2),
            SocketPacket(type: .binaryEvent, data: ["a:b"], attachmentCount: 0),
            SocketPacket(type: .binaryAck, ackID: 0, data: [], attachmentCount: 0),
            SocketPacket(type: .binaryAck, ackID: 7, data: [.object([("f", BinaryPlaceholder.json(0))])], attachmentCount: 1),
        ] {
            let message = packet.encodedMessage()
            XCTAssertEqual(try SocketPacket.decode(message[1...]), packet)
        }
    }
}

final class BinaryPacketAssemblerTests: XCTestCase {
    private func output(_ body: () throws(ProtocolError) -> BinaryPacketAssembler.Output, file: StaticString = #filePath, line: UInt = #line)
        -> BinaryPacketAssembler.Output?
    {
        do { return try body() } catch {
            XCTFail("unexpected \(error)", file: file, line: line)
            return nil
        }
    }

    private func assertThrows(
        _ expected: ProtocolError, file: StaticString = #filePath, line: UInt = #line, _ body: () throws(ProtocolError) -> BinaryPacketAssembler.Output
    ) {
        do {
            let out = try body()
            XCTFail("expected \(expected), got \(out)", file: file, line: line)
        } catch {
            XCTAssertEqual(error, expected, file: file, line: line)
        }
    }

    func testWebSocketSequence() {
        var a = BinaryPacketAssembler(maxPayload: 1000)
        let header = #"52-["a:b",{"room":"r","f":[\#(p0),\#(p1)]}]"#
        XCTAssertEqual(output { () throws(ProtocolError) in try a.receiveText(bytes(header)) }, .awaitingAttachments(remaining: 2))
        XCTAssertTrue(a.isAwaitingAttachments)
        XCTAssertEqual(a.remainingAttachments, 2)
        XCTAssertEqual(a.remainingBudget, 1000 - header.utf8.count)
        XCTAssertEqual(output { () throws(ProtocolError) in try a.receiveBinary([1, 2, 3]) }, .awaitingAttachments(remaining: 1))
        XCTAssertEqual(a.remainingBudget, 1000 - header.utf8.count - 3)
        let done = output { () throws(ProtocolError) in try a.receiveBinary([]) }
        guard case .binaryPacket(let packet)? = done else { return XCTFail("expected a packet, got \(String(describing: done))") }
        XCTAssertEqual(packet.attachments, [[1, 2, 3], []])
        XCTAssertEqual(packet.header, try SocketPacket.decode(bytes(header)))
        XCTAssertFalse(a.isAwaitingAttachments)
        XCTAssertNil(a.remainingBudget)
        XCTAssertEqual(a.remainingAttachments, 0)
    }

    func testTextPacketsPassThrough() {
        var a = BinaryPacketAssembler(maxPayload: 100)
        XCTAssertEqual(
            output { () throws(ProtocolError) in try a.receiveText(bytes(#"2["a:b",{}]"#)) }, .packet(SocketPacket(type: .event, data: ["a:b", [:]])))
        XCTAssertEqual(output { () throws(ProtocolError) in try a.receiveText(bytes("1")) }, .packet(SocketPacket(type: .disconnect)))
        // The payload limit is the WebSocket layer's business for text packets.
        let long = #"2["a:b",""# + String(repeating: "x", count: 200) + #""]"#
        guard case .packet? = output({ () throws(ProtocolError) in try a.receiveText(bytes(long)) }) else { return XCTFail() }
        assertThrows(.emptyPacket) { () throws(ProtocolError) in try a.receiveText([]) }
    }

    func testZeroAttachmentsCompleteAtOnce() {
        var a = BinaryPacketAssembler(maxPayload: 100)
        let header = SocketPacket(type: .binaryEvent, ackID: 4, data: ["a:b", [:]], attachmentCount: 0)
        XCTAssertEqual(
            output { () throws(ProtocolError) in try a.receiveText(bytes(#"50-4["a:b",{}]"#)) },
            .binaryPacket(BinaryPacket(header: header, attachments: [])))
        XCTAssertFalse(a.isAwaitingAttachments)
        assertThrows(.unexpectedBinaryMessage) { () throws(ProtocolError) in try a.receiveBinary([1]) }
    }

    func testBinaryWhenNoneExpected() {
        var a = BinaryPacketAssembler(maxPayload: 100)
        assertThrows(.unexpectedBinaryMessage) { () throws(ProtocolError) in try a.receiveBinary([1, 2]) }
        assertThrows(.unexpectedBinaryMessage) { () throws(ProtocolError) in try a.receiveBase64(bytes("AQI=")) }
        assertThrows(.unexpectedBinaryMessage) { () throws(ProtocolError) in try a.receiveBase64(bytes("!")) }
        _ = output { () throws(ProtocolError) in try a.receiveText(bytes(#"51-["a:b",\#(p0)]"#)) }
        _ = output { () throws(ProtocolError) in try a.receiveBinary([9]) }
        assertThrows(.unexpectedBinaryMessage) { () throws(ProtocolError) in try a.receiveBinary([9]) }
    }

    func testTextWhileAttachmentsAreExpected() {
        var a = BinaryPacketAssembler(maxPayload: 100)
        _ = output { () throws(ProtocolError) in try a.receiveText(bytes(#"52-8["a:b",[\#(p0),\#(p1)]]"#)) }
        _ = output { () throws(ProtocolError) in try a.receiveBinary([1]) }
        let next = bytes(#"23["a:b",{}]"#)
        assertThrows(.incompleteBinaryPacket(ackID: 8, expected: 2, received: 1)) { () throws(ProtocolError) in try a.receiveText(next) }
        XCTAssertFalse(a.isAwaitingAttachments)
        // The text message was not consumed: passing it again handles it.
        XCTAssertEqual(
            output { () throws(ProtocolError) in try a.receiveText(next) }, .packet(SocketPacket(type: .event, ackID: 3, data: ["a:b", [:]])))
        // And another binary header right after an abandoned one is fine too.
        _ = output { () throws(ProtocolError) in try a.receiveText(bytes(#"51-["a:b",\#(p0)]"#)) }
        assertThrows(.incompleteBinaryPacket(ackID: nil, expected: 1, received: 0)) { () throws(ProtocolError) in
            try a.receiveText(bytes(#"51-["a:b",\#(p0)]"#))
        }
    }

    func testBudgetIsExactAndIncremental() {
        let header = #"52-5["a:b",[\#(p0),\#(p1)]]"#
        let size = header.utf8.count
        // Exactly at the limit: accepted.
        var a = BinaryPacketAssembler(maxPayload: size + 10)
        _ = output { () throws(ProtocolError) in try a.receiveText(bytes(header)) }
        _ = output { () throws(ProtocolError) in try a.receiveBinary([UInt8](repeating: 1, count: 4)) }
        XCTAssertEqual(a.remainingBudget, 6)
        guard case .binaryPacket(let packet)? = output({ () throws(ProtocolError) in try a.receiveBinary([UInt8](repeating: 2, count: 6)) })
        else { return XCTFail() }
        XCTAssertEqual(packet.byteCount, size + 10)

        // One byte over, on the first attachment: refused before it is kept; the second is skipped.
        var b = BinaryPacketAssembler(maxPayload: size + 10)
        _ = output { () throws(ProtocolError) in try b.receiveText(bytes(header)) }
        assertThrows(.binaryPacketTooLarge(ackID: 5, limit: size + 10)) { () throws(ProtocolError) in
            try b.receiveBinary([UInt8](repeating: 1, count: 11))
        }
        XCTAssertEqual(b.remainingSkips, 1)
        XCTAssertEqual(output { () throws(ProtocolError) in try b.receiveBinary([1]) }, .skipped(remaining: 0))
        assertThrows(.unexpectedBinaryMessage) { () throws(ProtocolError) in try b.receiveBinary([1]) }

        // Over on the last attachment: nothing left to skip.
        var c = BinaryPacketAssembler(maxPayload: size + 10)
        _ = output { () throws(ProtocolError) in try c.receiveText(bytes(header)) }
        _ = output { () throws(ProtocolError) in try c.receiveBinary([UInt8](repeating: 1, count: 10)) }
        assertThrows(.binaryPacketTooLarge(ackID: 5, limit: size + 10)) { () throws(ProtocolError) in try c.receiveBinary([1]) }
        XCTAssertEqual(c.remainingSkips, 0)
        assertThrows(.unexpectedBinaryMessage) { () throws(ProtocolError) in try c.receiveBinary([1]) }
    }

    func testHeaderAloneOverBudget() {
        let header = #"52-["a:b",[\#(p0),\#(p1)]]"#
        var a = BinaryPacketAssembler(maxPayload: header.utf8.count - 1)
        assertThrows(.binaryPacketTooLarge(ackID: nil, limit: header.utf8.count - 1)) { () throws(ProtocolError) in
            try a.receiveText(bytes(header))
        }
        XCTAssertEqual(a.remainingSkips, 2)
    }

    func testRefusedHeaderSkipsItsAttachments() {
        var a = BinaryPacketAssembler(maxPayload: 1000)
        assertThrows(.invalidPlaceholder(.missing(num: 1), ackID: nil)) { () throws(ProtocolError) in
            try a.receiveText(bytes(#"53-["a:b",\#(p0)]"#))
        }
        XCTAssertEqual(output { () throws(ProtocolError) in try a.receiveBinary([1]) }, .skipped(remaining: 2))
        XCTAssertEqual(output { () throws(ProtocolError) in try a.receiveBase64(bytes("not base64!")) }, .skipped(remaining: 1))
        XCTAssertEqual(output { () throws(ProtocolError) in try a.receiveBinary([1]) }, .skipped(remaining: 0))
        assertThrows(.unexpectedBinaryMessage) { () throws(ProtocolError) in try a.receiveBinary([1]) }

        // Too many attachments: they are skipped too, so the client gets one error.
        assertThrows(.tooManyAttachments(limit: 2)) { () throws(ProtocolError) in
            var b = BinaryPacketAssembler(maxPayload: 1000, maxAttachments: 2)
            defer { XCTAssertEqual(b.remainingSkips, 3) }
            return try b.receiveText(bytes(#"53-["a:b"]"#))
        }
        // No count, nothing to skip.
        var c = BinaryPacketAssembler(maxPayload: 1000)
        assertThrows(.invalidAttachmentCount) { () throws(ProtocolError) in try c.receiveText(bytes(#"5x-["a:b"]"#)) }
        XCTAssertEqual(c.remainingSkips, 0)
    }

    func testTextEndsSkipping() {
        var a = BinaryPacketAssembler(maxPayload: 1000)
        assertThrows(.invalidJSON(.unexpectedEnd)) { () throws(ProtocolError) in try a.receiveText(bytes(#"52-["a:b""#)) }
        XCTAssertEqual(a.remainingSkips, 2)
        XCTAssertEqual(output { () throws(ProtocolError) in try a.receiveText(bytes("1")) }, .packet(SocketPacket(type: .disconnect)))
        XCTAssertEqual(a.remainingSkips, 0)
        assertThrows(.unexpectedBinaryMessage) { () throws(ProtocolError) in try a.receiveBinary([1]) }
    }

    func testPollingSequenceFromTheProtocolDocument() {
        // `451-["hello",{"_placeholder":true,"num":0}]␞bAQID` over HTTP long-polling.
        let payload = Array(#"451-["hello",{"_placeholder":true,"num":0}]"#.utf8) + [0x1E] + Array("bAQID".utf8)
        let parts = payload.split(separator: 0x1E, omittingEmptySubsequences: false)
        XCTAssertEqual(parts.count, 2)
        var a = BinaryPacketAssembler(maxPayload: 100)
        XCTAssertEqual(output { () throws(ProtocolError) in try a.receiveText(parts[0].dropFirst()) }, .awaitingAttachments(remaining: 1))
        let done = output { () throws(ProtocolError) in try a.receiveBase64(parts[1].dropFirst()) }
        XCTAssertEqual(done, .binaryPacket(.event(name: "hello", payload: BinaryPlaceholder.json(0), attachments: [[1, 2, 3]])))
        // Encoding gives the same payload back.
        guard case .binaryPacket(let packet)? = done else { return XCTFail() }
        XCTAssertEqual(packet.encoded().pollingPayload(), payload)
    }

    func testInvalidBase64ConsumesTheAttachment() {
        var a = BinaryPacketAssembler(maxPayload: 100)
        _ = output { () throws(ProtocolError) in try a.receiveText(bytes(#"52-["a:b",\#(p0),\#(p1)]"#)) }
        assertThrows(.invalidBase64) { () throws(ProtocolError) in try a.receiveBase64(bytes("AQJ")) }  // length ok, bits left over
        XCTAssertEqual(a.remainingSkips, 1)
        var b = BinaryPacketAssembler(maxPayload: 100)
        _ = output { () throws(ProtocolError) in try b.receiveText(bytes(#"52-["a:b",\#(p0),\#(p1)]"#)) }
        assertThrows(.invalidBase64) { () throws(ProtocolError) in try b.receiveBase64(bytes("A")) }  // impossible length
        XCTAssertEqual(b.remainingSkips, 1)
        var c = BinaryPacketAssembler(maxPayload: 100)
        _ = output { () throws(ProtocolError) in try c.receiveText(bytes(#"51-["a:b",\#(p0)]"#)) }
        assertThrows(.invalidBase64) { () throws(ProtocolError) in try c.receiveBase64(bytes("AQ-D")) }
        XCTAssertEqual(c.remainingSkips, 0)
        XCTAssertFalse(c.isAwaitingAttachments)
    }

    func testBase64BudgetIsCheckedBeforeDecoding() {
        let header = #"51-["a:b",\#(p0)]"#
        var a = BinaryPacketAssembler(maxPayload: header.utf8.count + 3)
        _ = output { () throws(ProtocolError) in try a.receiveText(bytes(header)) }
        // 4 decoded bytes, over by one: refused even though the text is not valid base64 at all,
        // so a huge text is never decoded.
        assertThrows(.binaryPacketTooLarge(ackID: nil, limit: header.utf8.count + 3)) { () throws(ProtocolError) in
            try a.receiveBase64(bytes("!!!!!!"))
        }
        var b = BinaryPacketAssembler(maxPayload: header.utf8.count + 3)
        _ = output { () throws(ProtocolError) in try b.receiveText(bytes(header)) }
        XCTAssertEqual(
            output { () throws(ProtocolError) in try b.receiveBase64(bytes("AQID")) },
            .binaryPacket(.event(name: "a:b", payload: BinaryPlaceholder.json(0), attachments: [[1, 2, 3]])))
    }

    func testBinaryAckSequence() {
        var a = BinaryPacketAssembler(maxPayload: 100)
        _ = output { () throws(ProtocolError) in try a.receiveText(bytes(#"61-/admin,456[\#(p0)]"#)) }
        XCTAssertEqual(
            output { () throws(ProtocolError) in try a.receiveBinary([0xFF]) },
            .binaryPacket(.ack(id: 456, payload: BinaryPlaceholder.json(0), attachments: [[0xFF]], namespace: "/admin")))
    }

    func testMaxAttachmentsAndDepthAreConfigurable() {
        var a = BinaryPacketAssembler(maxPayload: 100, maxAttachments: 1, maxDepth: 2)
        assertThrows(.tooManyAttachments(limit: 1)) { () throws(ProtocolError) in try a.receiveText(bytes(#"52-["a:b",\#(p0),\#(p1)]"#)) }
        a.reset()
        assertThrows(.invalidJSON(.tooDeep(limit: 2))) { () throws(ProtocolError) in try a.receiveText(bytes(#"51-["a:b",[\#(p0)]]"#)) }
        XCTAssertEqual(a.maxPayload, 100)
        XCTAssertEqual(BinaryPacketAssembler(maxPayload: 1).maxAttachments, 10)
    }

    func testReset() {
        var a = BinaryPacketAssembler(maxPayload: 100)
        _ = output { () throws(ProtocolError) in try a.receiveText(bytes(#"51-["a:b",\#(p0)]"#)) }
        a.reset()
        XCTAssertFalse(a.isAwaitingAttachments)
        XCTAssertEqual(output { () throws(ProtocolError) in try a.receiveText(bytes("1")) }, .packet(SocketPacket(type: .disconnect)))
    }
}

final class BinaryPacketEncodingTests: XCTestCase {
    func testEventEncoding() {
        let packet = BinaryPacket.event(
            name: "file:share", payload: .object([("room", "r"), ("file", BinaryPlaceholder.json(0)), ("thumb", BinaryPlaceholder.json(1))]),
            attachments: [[0, 1, 2, 0xFF], [0x66, 0x6F]])
        let encoded = packet.encoded()
        XCTAssertEqual(
            text(encoded.header),
            #"452-["file:share",{"room":"r","file":{"_placeholder":true,"num":0},"thumb":{"_placeholder":true,"num":1}}]"#)
        XCTAssertEqual(encoded.attachments, [[0, 1, 2, 0xFF], [0x66, 0x6F]])
        XCTAssertEqual(encoded.webSocketByteCount, encoded.header.count + 6)
        XCTAssertEqual(encoded.pollingPackets().map(text), [text(encoded.header), "bAAEC/w==", "bZm8="])
        XCTAssertEqual(text(encoded.pollingPayload()), text(encoded.header) + "\u{1E}bAAEC/w==\u{1E}bZm8=")
        XCTAssertEqual(packet.byteCount, encoded.header.count - 1 + 6)
    }

    func testAckEncoding() {
        let encoded = BinaryPacket.ack(id: 12, payload: BinaryPlaceholder.json(0), attachments: [[1]]).encoded()
        XCTAssertEqual(text(encoded.header), #"461-12[{"_placeholder":true,"num":0}]"#)
        XCTAssertEqual(text(encoded.pollingPayload()), #"461-12[{"_placeholder":true,"num":0}]"# + "\u{1E}bAQ==")
        let ns = BinaryPacket.ack(id: 1, payload: [:], attachments: [], namespace: "/a").encoded()
        XCTAssertEqual(text(ns.header), "460-/a,1[{}]")
        XCTAssertEqual(ns.pollingPayload(), ns.header)
    }

    func testCountFollowsTheAttachments() {
        var packet = BinaryPacket.event(name: "a:b", payload: BinaryPlaceholder.json(0), attachments: [[1]])
        packet.header.attachmentCount = 7
        XCTAssertEqual(text(packet.encoded().header), #"451-["a:b",{"_placeholder":true,"num":0}]"#)
    }

    /// decode(encode(x)) == x over both transports, for generated packets.
    func testGeneratedRoundTrips() throws {
        var rng = SplitMix64(seed: 0xB1A7)
        for round in 0..<300 {
            let count = Int.random(in: 0...SocketPacket.defaultMaxAttachments, using: &rng)
            let attachments = (0..<count).map { _ in (0..<Int.random(in: 0...40, using: &rng)).map { _ in UInt8.random(in: 0...255, using: &rng) } }
            var slots: [JSONValue] = (0..<count).map(BinaryPlaceholder.json).shuffled(using: &rng)
            var payload: [(String, JSONValue)] = [("room", .string("conversation:\(round)"))]
            while let p = slots.popLast() {
                switch Int.random(in: 0..<3, using: &rng) {
                case 0: payload.append(("k\(slots.count)", p))
                case 1: payload.append(("a\(slots.count)", [1, p, "x"]))
                default: payload.append(("o\(slots.count)", .object([("deep", [.object([("p", p)])])])))
                }
            }
            let isAck = round % 4 == 3
            let namespace = round % 5 == 0 ? "/ns" : "/"
            let packet =
                isAck
                ? BinaryPacket.ack(id: Int64(round), payload: .object(payload), attachments: attachments, namespace: namespace)
                : BinaryPacket.event(name: "x:y", payload: .object(payload), attachments: attachments, namespace: namespace)
            let encoded = packet.encoded()

            var ws = BinaryPacketAssembler(maxPayload: packet.byteCount)
            var result = try ws.receiveText(encoded.header[1...])
            for attachment in encoded.attachments { result = try ws.receiveBinary(attachment) }
            XCTAssertEqual(result, .binaryPacket(packet))

            var polling = BinaryPacketAssembler(maxPayload: packet.byteCount)
            let parts = encoded.pollingPayload().split(separator: 0x1E, omittingEmptySubsequences: false)
            XCTAssertEqual(parts.count, count + 1)
            result = try polling.receiveText(parts[0].dropFirst())
            for part in parts.dropFirst() {
                XCTAssertEqual(part.first, UInt8(ascii: "b"))
                result = try polling.receiveBase64(part.dropFirst())
            }
            XCTAssertEqual(result, .binaryPacket(packet))

            // One byte less of budget and the packet no longer fits.
            if packet.byteCount > 0 {
                var tight = BinaryPacketAssembler(maxPayload: packet.byteCount - 1)
                let outcome = Result { () throws(ProtocolError) in
                    _ = try tight.receiveText(encoded.header[1...])
                    for attachment in encoded.attachments { _ = try tight.receiveBinary(attachment) }
                }
                guard case .failure(.binaryPacketTooLarge(packet.header.ackID, packet.byteCount - 1)) = outcome else {
                    return XCTFail("round \(round): \(outcome)")
                }
            }
        }
    }
}

final class BinaryEventTests: XCTestCase {
    private func assemble(_ header: String, _ attachments: [[UInt8]]) throws -> BinaryPacket {
        var a = BinaryPacketAssembler(maxPayload: 10_000)
        var out = try a.receiveText(bytes(header))
        for attachment in attachments { out = try a.receiveBinary(attachment) }
        guard case .binaryPacket(let packet) = out else { throw ProtocolError.unexpectedBinaryMessage }
        return packet
    }

    func testInboundBinaryEvent() throws {
        let packet = try assemble(#"51-5["file:share",{"room":"r","file":\#(p0)}]"#, [[7, 8]])
        let event = try InboundEvent(binary: packet)
        XCTAssertEqual(event.name, "file:share")
        XCTAssertEqual(event.ackID, 5)
        XCTAssertEqual(event.attachments, [[7, 8]])
        XCTAssertEqual(event.payload["file"], BinaryPlaceholder.json(0))
    }

    func testAttachmentsOutsideThePayloadAreRefused() throws {
        let packet = try assemble(#"52-["file:share",{"room":"r","file":\#(p0)},\#(p1)]"#, [[1], [2]])
        XCTAssertThrowsError(try InboundEvent(binary: packet)) { error in
            XCTAssertEqual(
                error as? ProtocolError,
                .invalidPayload("a binary event's attachments are placeholders inside its payload (the argument after the name)"))
        }
        let nameless = try assemble(#"51-[\#(p0),{"room":"r"}]"#, [[1]])
        XCTAssertThrowsError(try InboundEvent(binary: nameless))
        let ack = try assemble(#"61-3[\#(p0)]"#, [[1]])
        XCTAssertThrowsError(try InboundEvent(binary: ack)) { error in
            XCTAssertEqual(error as? ProtocolError, .unexpectedPacket("expected a binary event packet"))
        }
        // A `42` is not a binary event and has no attachments.
        XCTAssertEqual(try InboundEvent(packet: SocketPacket.decode(bytes(#"2["a:b",{}]"#))).attachments, [])
    }

    func testCustomValidationWithAttachments() throws {
        let payload: JSONValue = .object([("room", "r"), ("file", BinaryPlaceholder.json(0)), ("more", [BinaryPlaceholder.json(1)])])
        XCTAssertEqual(try EventValidator.custom(payload, attachmentCount: 2), payload)
        assertRelayError(.invalidPayload) { () throws(RelayError) in try EventValidator.custom(payload, attachmentCount: 1) }
        assertRelayError(.invalidPayload) { () throws(RelayError) in try EventValidator.custom(payload, attachmentCount: 3) }
        for key in ["from", "ts"] {
            let forged: JSONValue = .object([("room", "r"), (key, BinaryPlaceholder.json(0))])
            assertRelayError(.invalidPayload) { () throws(RelayError) in try EventValidator.custom(forged, attachmentCount: 1) }
            // Nested inside `from`/`ts` is no better: stamping replaces the whole value (found by FuzzBinaryPackets).
            let nestedInStamped: JSONValue = .object([
                ("room", "r"), (key, .array([BinaryPlaceholder.json(1), .object([("deep", BinaryPlaceholder.json(0))])])),
            ])
            assertRelayError(.invalidPayload) { () throws(RelayError) in try EventValidator.custom(nestedInStamped, attachmentCount: 2) }
        }
        // Nested `from`/`ts` are the client's own fields: kept.
        let nested: JSONValue = .object([("room", "r"), ("meta", .object([("from", BinaryPlaceholder.json(0))]))])
        XCTAssertEqual(try EventValidator.custom(nested, attachmentCount: 1), nested)
        // No attachments: plain custom(_:), placeholder-like JSON and all.
        let plain: JSONValue = .object([("room", "r"), ("from", BinaryPlaceholder.json(0))])
        XCTAssertEqual(try EventValidator.custom(plain, attachmentCount: 0), plain)
        assertRelayError(.invalidPayload) { () throws(RelayError) in try EventValidator.custom(BinaryPlaceholder.json(0), attachmentCount: 1) }
    }

    func testStampKeepsPlaceholders() throws {
        let payload: JSONValue = .object([
            ("room", "r"), ("file", BinaryPlaceholder.json(0)), ("list", [BinaryPlaceholder.json(1)]), ("from", "forged"), ("ts", 1),
        ])
        let stamped = EventValidator.stamp(payload, from: "alice", ts: 42)
        XCTAssertEqual(BinaryPlaceholder.count(in: stamped), 2)
        XCTAssertNoThrow(try BinaryPlaceholder.validate(stamped, attachmentCount: 2))
        XCTAssertEqual(stamped["from"], "alice")
        XCTAssertEqual(stamped["ts"], 42)
    }

    /// In → validate → stamp → out: the attachments leave with the same bytes, and the forwarded
    /// packet decodes with the stamped payload.
    func testForwardingPipeline() throws {
        let attachments: [[UInt8]] = [Array(0...255), [], [0x1E, 0x62]]
        let header = #"53-9["file:share",{"room":"r","from":"mallory","parts":[\#(p1),{"_placeholder":true,"num":2},\#(p0)]}]"#
        let event = try InboundEvent(binary: try assemble(header, attachments))
        let valid = try EventValidator.custom(event.payload, attachmentCount: event.attachments.count)
        let stamped = EventValidator.stamp(valid, from: "alice", ts: 1_700_000_000_000)
        let out = BinaryPacket.event(name: event.name, payload: stamped, attachments: event.attachments).encoded()
        XCTAssertEqual(out.attachments, attachments)

        var receiver = BinaryPacketAssembler(maxPayload: 10_000)
        var result = try receiver.receiveText(out.header[1...])
        for attachment in out.attachments { result = try receiver.receiveBinary(attachment) }
        guard case .binaryPacket(let received) = result else { return XCTFail("\(result)") }
        let forwarded = try InboundEvent(binary: received)
        XCTAssertEqual(forwarded.payload["from"], "alice")
        XCTAssertEqual(forwarded.payload["parts"], [BinaryPlaceholder.json(1), BinaryPlaceholder.json(2), BinaryPlaceholder.json(0)])
        XCTAssertEqual(forwarded.attachments, attachments)
    }
}

final class BinaryPlaceholderTests: XCTestCase {
    func testNumberOf() {
        XCTAssertEqual(BinaryPlaceholder.number(of: BinaryPlaceholder.json(3)), 3)
        XCTAssertEqual(BinaryPlaceholder.number(of: .object([("num", 2), ("_placeholder", true)])), 2)
        XCTAssertNil(BinaryPlaceholder.number(of: .object([("_placeholder", true), ("num", 2), ("x", 1)])))
        XCTAssertNil(BinaryPlaceholder.number(of: .object([("_placeholder", true), ("_placeholder", true)])))
        XCTAssertNil(BinaryPlaceholder.number(of: .object([("num", 1), ("num", 2)])))
        XCTAssertNil(BinaryPlaceholder.number(of: [BinaryPlaceholder.json(0)]))
        XCTAssertNil(BinaryPlaceholder.number(of: .object([("_placeholder", true), ("num", .double(1))])))
    }

    func testCountAndIsPlaceholder() {
        XCTAssertTrue(BinaryPlaceholder.isPlaceholder(.object([("_placeholder", false)])))
        XCTAssertFalse(BinaryPlaceholder.isPlaceholder(.object([("placeholder", true)])))
        XCTAssertFalse(BinaryPlaceholder.isPlaceholder("_placeholder"))
        let value: JSONValue = [BinaryPlaceholder.json(0), .object([("a", BinaryPlaceholder.json(1)), ("_placeholder", 1)]), "x"]
        // An object with a `_placeholder` key counts once; what is inside it is not searched.
        XCTAssertEqual(BinaryPlaceholder.count(in: value), 2)
        XCTAssertThrowsError(try BinaryPlaceholder.validate(value, attachmentCount: 2))
    }
}
