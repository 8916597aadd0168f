import XCTest

@testable import RelayCore

final class ReceiptTests: XCTestCase {
    func testKindFromEventName() {
        XCTAssertEqual(ReceiptKind(eventName: "message:delivered"), .delivered)
        XCTAssertEqual(ReceiptKind(eventName: "message:read"), .read)
        XCTAssertNil(ReceiptKind(eventName: "message:reaction"))
        XCTAssertEqual(ReceiptKind.read.eventName, "message:read")
    }

    func testValidPayload() throws {
        let r = try NewReceipt(payload: ["room": "conversation:1", "messageId": "m1", "authorId": "alice", "from": "mallory"], userID: "bob", kind: .read, ts: 5)
        XCTAssertEqual(r, NewReceipt(room: "conversation:1", messageID: "m1", authorID: "alice", userID: "bob", kind: .read, ts: 5))
    }

    func testInvalidPayloadsAreRefused() {
        let bad: [JSONValue] = [
            ["messageId": "m1", "authorId": "a"],
            ["room": "r", "authorId": "a"],
            ["room": "r", "messageId": "m1"],
            ["room": "r", "messageId": "", "authorId": "a"],
            ["room": "r", "messageId": .string(String(repeating: "m", count: 129)), "authorId": "a"],
            ["room": "r", "messageId": 7, "authorId": "a"],
            "not an object",
        ]
        for payload in bad {
            XCTAssertThrowsError(try NewReceipt(payload: payload, userID: "bob", kind: .delivered, ts: 1), "\(payload)") { error in
                XCTAssertEqual((error as? RelayError)?.code, .invalidPayload)
            }
        }
    }

    func testJSONShapeIsTheContract() {
        let r = Receipt(id: 7, room: "c:1", messageID: "m", authorID: "a", userID: "b", kind: .delivered, ts: 9)
        XCTAssertEqual(JSONWriter.string(r.json), #"{"id":7,"room":"c:1","messageId":"m","authorId":"a","userId":"b","kind":"delivered","ts":9}"#)
    }
}
