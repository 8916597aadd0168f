import NIOCore
import XCTest

@testable import RelayServer

/// A request's body under each policy: kept up to its limit, dropped, or refused.
final class RequestBodyTests: XCTestCase {
    private let allocator = ByteBufferAllocator()

    private func chunk(_ count: Int) -> ByteBuffer {
        allocator.buffer(bytes: [UInt8](repeating: UInt8(ascii: "a"), count: count))
    }

    func testKeepsChunksUpToTheLimit() {
        var body = RequestBody(policy: .read(limit: 10, release: nil))
        var a = chunk(4), b = chunk(6)
        body.append(&a)
        body.append(&b)
        XCTAssertFalse(body.tooLarge)
        XCTAssertEqual(body.take().count, 10)
        XCTAssertEqual(body.take(), [], "handed over once")
    }

    func testOneByteOverTheLimitDropsEverythingKept() {
        var body = RequestBody(policy: .read(limit: 10, release: nil))
        var a = chunk(10), b = chunk(1), c = chunk(1)
        body.append(&a)
        body.append(&b)
        body.append(&c)
        XCTAssertTrue(body.tooLarge)
        XCTAssertEqual(body.limit, 10)
        XCTAssertNil(body.bytes, "nothing of an oversized body is kept")
    }

    func testDiscardKeepsNothingAndRemembersThatBytesCame() {
        var body = RequestBody(policy: .discard)
        var empty = chunk(0)
        body.append(&empty)
        XCTAssertFalse(body.dropped, "an empty chunk is no body")
        var a = chunk(1 << 20)
        body.append(&a)
        XCTAssertTrue(body.dropped)
        XCTAssertFalse(body.tooLarge)
        XCTAssertNil(body.bytes)
    }

    func testRefusalIsDecidedBeforeTheBodyAndKeepsNothing() {
        let refusal = HTTPResponse(status: .unauthorized, contentType: "text/plain", body: Array("no".utf8))
        var body = RequestBody(policy: .refuse(refusal))
        var a = chunk(100)
        body.append(&a)
        XCTAssertEqual(body.refusal?.status, .unauthorized)
        XCTAssertTrue(body.dropped)
        XCTAssertNil(body.bytes)
    }

    func testBeforeAnyHeadNothingIsAllowed() {
        var body = RequestBody()
        var a = chunk(1)
        body.append(&a)
        XCTAssertTrue(body.tooLarge)
    }
}
