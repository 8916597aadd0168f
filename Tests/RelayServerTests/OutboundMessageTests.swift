import NIOCore
import RelayCore
import XCTest

@testable import RelayServer
@testable import RelayBackends

/// `OutboundMessage` is a value with one copy-on-write box inside: copies share it until one of
/// them is changed, and a change never shows through another copy.
final class OutboundMessageTests: XCTestCase {
    private func message(_ text: String) -> OutboundMessage {
        var m = OutboundMessage(bytes: ByteBuffer(string: text), durable: true)
        m.label = "message:reaction"
        m.origin = "sid-1"
        return m
    }

    func testACopyKeepsItsValuesWhenTheOtherChanges() {
        let original = message("42[\"a\",1]")
        var copy = original
        copy.bytes = ByteBuffer(string: "42[\"b\",2]")
        copy.origin = nil
        copy.durable = false
        copy.createdAt = 7
        copy.attachments = [ByteBuffer(string: "x")]
        XCTAssertEqual(String(buffer: original.bytes), "42[\"a\",1]")
        XCTAssertEqual(original.origin, "sid-1")
        XCTAssertTrue(original.durable)
        XCTAssertEqual(original.createdAt, 0)
        XCTAssertTrue(original.attachments.isEmpty)
        XCTAssertEqual(original.label, "message:reaction")
        XCTAssertEqual(String(buffer: copy.bytes), "42[\"b\",2]")
        XCTAssertNil(copy.origin)
        XCTAssertEqual(copy.label, "message:reaction")
        XCTAssertEqual(copy.byteCount, copy.bytes.readableBytes + 1)
    }

    func testNewBytesDropTheFramesMadeFromTheOldOnes() {
        var m = message("42[\"a\",1]").withFrames()
        XCTAssertNotNil(m.frames)
        let framed = m
        m.bytes = ByteBuffer(string: "42[\"b\",2]")
        XCTAssertNil(m.frames)
        XCTAssertNotNil(framed.frames, "the copy made before keeps its frames")
        m.prepareFrames()
        m.compressed = ByteBuffer(string: "z")
        XCTAssertNil(m.frames)
    }

    func testWithFramesLeavesTheOriginalUnframed() {
        let m = message("42[\"a\",1]")
        let framed = m.withFrames()
        XCTAssertNil(m.frames)
        XCTAssertEqual(framed.frames?.plain.readableBytes, m.bytes.readableBytes + 2)
    }

    /// The offset variant is made once per fan-out, on first use: the bytes with the offset,
    /// framed, without a stamp; the message it was made from keeps its own bytes.
    func testTheOffsetVariantIsTheSameEventWithItsOffset() throws {
        let position = StreamPosition(stream: .room("r"), offset: StreamOffset(ms: 5, seq: 1))
        let base = message("42[\"a\",1]")
        let stamp = RecoveryStamp(position: position, plan: .init(compressAtLeast: nil, deflaters: DeflaterPool()))
        let variant = try XCTUnwrap(stamp.offsetMessage(of: base))
        let again = try XCTUnwrap(stamp.offsetMessage(of: base))
        XCTAssertEqual(
            again.bytes.withUnsafeReadableBytes { UInt(bitPattern: $0.baseAddress) }, variant.bytes.withUnsafeReadableBytes { UInt(bitPattern: $0.baseAddress) },
            "made once, then shared")
        XCTAssertNil(RecoveryStamp(position: position).offsetMessage(of: base), "no plan: no socket took offsets at the fan-out")
        XCTAssertEqual(String(buffer: variant.bytes), "42[\"a\",1,\"\(position.wire)\"]")
        XCTAssertNil(variant.stamp)
        XCTAssertTrue(variant.durable)
        XCTAssertEqual(variant.label, "message:reaction")
        XCTAssertEqual(variant.frames?.plain.readableBytes, variant.bytes.readableBytes + 2)
        XCTAssertEqual(String(buffer: base.bytes), "42[\"a\",1]")
    }

    /// The variant is compressed when the plan says so and it is long enough, and not otherwise.
    func testTheOffsetVariantIsCompressedByItsPlan() throws {
        let position = StreamPosition(stream: .room("r"), offset: StreamOffset(ms: 5, seq: 1))
        let long = message("42[\"a\",\"" + String(repeating: "x", count: 2000) + "\"]")
        let pool = DeflaterPool()
        XCTAssertNotNil(RecoveryStamp(position: position, plan: .init(compressAtLeast: 1024, deflaters: pool)).offsetMessage(of: long)?.compressed)
        XCTAssertNil(RecoveryStamp(position: position, plan: .init(compressAtLeast: 4096, deflaters: pool)).offsetMessage(of: long)?.compressed)
        XCTAssertNil(RecoveryStamp(position: position, plan: .init(compressAtLeast: nil, deflaters: pool)).offsetMessage(of: long)?.compressed)
    }
}
