import XCTest
@testable import RelayCore

final class RelayErrorCodeTests: XCTestCase {
    func testRawValuesAreUniqueSnakeCase() {
        let raw = RelayErrorCode.allCases.map(\.rawValue)
        XCTAssertEqual(Set(raw).count, raw.count)
        for r in raw {
            XCTAssertFalse(r.isEmpty)
            XCTAssertTrue(r.utf8.allSatisfy { (0x61...0x7A).contains($0) || $0 == UInt8(ascii: "_") }, r)
        }
    }

    func testSpecificRawValues() {
        XCTAssertEqual(RelayErrorCode.noLiveShare.rawValue, "no_live_share")
        XCTAssertEqual(RelayErrorCode.tooManyRooms.rawValue, "too_many_rooms")
        XCTAssertEqual(RelayErrorCode.roomFull.rawValue, "room_full")
        XCTAssertEqual(RelayErrorCode.invalidEventName.rawValue, "invalid_event_name")
        XCTAssertEqual(RelayErrorCode.binaryNotSupported.rawValue, "binary_not_supported")
        XCTAssertEqual(RelayErrorCode.rateLimited.rawValue, "rate_limited")
        XCTAssertEqual(RelayErrorCode.tokenAlgNone.rawValue, "token_alg_none")
        XCTAssertEqual(RelayErrorCode(rawValue: "custom_events_disabled"), .customEventsDisabled)
    }

    func testEveryCodeHasAMessage() {
        for code in RelayErrorCode.allCases {
            XCTAssertFalse(code.message.isEmpty, code.rawValue)
        }
    }

    func testRelayErrorDefaultsToTheCodeMessage() {
        let e = RelayError(.noLiveShare)
        XCTAssertEqual(e.code, .noLiveShare)
        XCTAssertEqual(e.message, RelayErrorCode.noLiveShare.message)
        XCTAssertEqual(RelayError(.roomFull, "custom").message, "custom")
    }

    func testJSONShapes() {
        let e = RelayError(.notInRoom, "join r first")
        XCTAssertEqual(JSONWriter.string(e.json), #"{"code":"not_in_room","message":"join r first"}"#)
        XCTAssertEqual(
            JSONWriter.string(e.ackPayload),
            #"{"ok":false,"error":{"code":"not_in_room","message":"join r first"}}"#)
    }
}
