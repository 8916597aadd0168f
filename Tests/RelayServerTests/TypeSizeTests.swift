import Foundation
import XCTest

/// No type in Sources has two jobs: at most 12 stored properties and 25 methods, its extensions
/// included (scripts/check-type-sizes.py; the types still over are listed there and may only
/// shrink).
final class TypeSizeTests: XCTestCase {
    func testNoTypeGrowsPastTheLimits() throws {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["python3", root.appendingPathComponent("scripts/check-type-sizes.py").path]
        let output = Pipe()
        process.standardOutput = output
        process.standardError = output
        try process.run()
        let data = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        let report = String(decoding: data, as: UTF8.self)
        XCTAssertEqual(process.terminationStatus, 0, report)
        XCTAssertTrue(report.contains("check-type-sizes: ok"), report)
    }
}
