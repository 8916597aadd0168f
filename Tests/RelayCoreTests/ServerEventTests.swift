import Foundation
import XCTest
@testable import RelayCore

final class ServerEventTests: XCTestCase {
    func testEveryServerEventIsATableEntry() {
        for event in ServerEvent.allCases {
            XCTAssertEqual(EventPolicyTable.known[event.name], event.policy, event.name)
            XCTAssertEqual(event.policy.metricLabel, event.name)
        }
        XCTAssertEqual(ServerEvent.typing(true), .typingStart)
        XCTAssertEqual(ServerEvent.typing(false), .typingStop)
        // typing:start and typing:stop replace each other in a queue; so do presence join/leave.
        XCTAssertEqual(
            ServerEvent.typingStart.policy.coalescingKey(room: "r", user: "u"), ServerEvent.typingStop.policy.coalescingKey(room: "r", user: "u"))
        XCTAssertEqual(
            ServerEvent.presenceJoin.policy.coalescingKey(room: "r", user: "u"),
            ServerEvent.presenceLeave.policy.coalescingKey(room: "r", user: "u"))
        XCTAssertNil(ServerEvent.locationStop.policy.coalescingKey(room: "r", user: "u"))
        XCTAssertFalse(ServerEvent.typingStart.policy.isRecoverable)
        XCTAssertFalse(ServerEvent.presenceJoin.policy.isRecoverable, "presence is live only (never in history)")
        XCTAssertTrue(ServerEvent.locationStop.policy.isRecoverable)
    }

    func testReceiptKindsNameTheirEntries() {
        for kind in ReceiptKind.allCases {
            XCTAssertEqual(EventPolicyTable.known[kind.eventName], kind.policy)
            XCTAssertTrue(kind.policy.isDurable)
            XCTAssertEqual(ReceiptKind(eventName: kind.eventName), kind)
        }
    }

    func testBackendEventsAndMetricLabels() {
        XCTAssertEqual(EventPolicyTable.backend("notification:new"), EventPolicyTable.notificationNew)
        XCTAssertEqual(EventPolicyTable.backend("chat:tick").kind, .custom)
        XCTAssertEqual(EventPolicyTable.backend("chat:tick").metricLabel, "custom")
        XCTAssertEqual(EventPolicyTable.metricLabel(for: "chat:tick"), "custom")
        XCTAssertEqual(EventPolicyTable.metricLabel(for: "typing:start"), "typing:start")
        XCTAssertEqual(EventPolicyTable.metricLabel(for: "error"), "error")
        XCTAssertEqual(EventPolicyTable.metricLabel(for: "no grammar"), "invalid")
    }

    /// Event names are written in the policy table only: anywhere else in the sources, an event
    /// is named by its entry (`ServerEvent`, `EventPolicyTable.x`, `ReceiptKind`).
    func testNoEventNameLiteralOutsideThePolicyTable() throws {
        let sources = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("Sources")
        let table = sources.appendingPathComponent("RelayCore/Events/EventPolicyTable.swift").standardizedFileURL.path
        let names = Set(EventPolicyTable.known.keys)
        var offenders: [String] = []
        let files = FileManager.default.enumerator(at: sources, includingPropertiesForKeys: nil)
        while let url = files?.nextObject() as? URL {
            guard url.pathExtension == "swift", url.standardizedFileURL.path != table else { continue }
            let text = try String(contentsOf: url, encoding: .utf8)
            for (n, line) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
                let code = line.trimmingCharacters(in: .whitespaces)
                if code.hasPrefix("//") { continue }
                for name in names where line.contains("\"\(name)\"") {
                    offenders.append("\(url.lastPathComponent):\(n + 1): \(name)")
                }
            }
        }
        XCTAssertEqual(offenders, [], "event names belong in EventPolicyTable")
    }
}
