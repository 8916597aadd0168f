import RelayCore
import XCTest

@testable import RelayServer
@testable import RelayBackends

/// What nodes tell each other on `relay:control` reads back as sent, and anything else is dropped.
final class ControlMessageTests: XCTestCase {
    func testEveryMessageReadsBackAsSent() {
        let messages: [ControlMessage] = [
            .disconnectUser(user: "alice", revokedBefore: nil),
            .disconnectUser(user: "alice", revokedBefore: 1_700_000_000),
            .handOver(pid: "Bom6EtMa9T-Hl8pjP_uXLw", user: "alice"),
        ]
        for message in messages {
            XCTAssertEqual(ControlMessage(json: message.json), message)
        }
    }

    func testMalformedOrUnknownMessagesAreDropped() throws {
        let texts = [
            #"{"t":"handover","u":"alice"}"#,  // no pid
            #"{"t":"handover","p":7,"u":"alice"}"#,
            #"{"t":"handover","p":"","u":"alice"}"#,
            #"{"t":"handover","p":"\#(String(repeating: "x", count: 65))","u":"alice"}"#,
            #"{"t":"handover","p":"abc"}"#,  // no user
            #"{"t":"end","u":"alice","r":"soon"}"#,
            #"{"t":"other","u":"alice"}"#,
            #"[]"#,
        ]
        for text in texts {
            let json = try JSONParser.parse(Array(text.utf8))
            XCTAssertNil(ControlMessage(json: json), text)
        }
    }
}
