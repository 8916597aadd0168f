import Foundation
import XCTest

@testable import RelayServer

/// README's settings table is made from the declarations (`ConfigurationLoader.settings`).
final class ReadmeSettingsTableTests: XCTestCase {
    /// README.md's table is `relay settings --markdown`, row for row.
    func testReadmeTableIsTheDeclarations() throws {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let readme = try String(contentsOf: root.appendingPathComponent("README.md"), encoding: .utf8)
        let begin = try XCTUnwrap(readme.range(of: "<!-- settings-table:begin -->\n"), "README.md has no settings-table markers")
        let end = try XCTUnwrap(readme.range(of: "<!-- settings-table:end -->", range: begin.upperBound..<readme.endIndex))
        let documented = readme[begin.upperBound..<end.lowerBound].split(separator: "\n").map(String.init)
        let declared = ConfigurationLoader.markdownTable().split(separator: "\n").map(String.init)
        let regenerate = "regenerate README's table with `swift run relay settings --markdown`"
        for row in declared where !documented.contains(row) { XCTFail("README.md lacks (or words differently) \(row)\n\(regenerate)") }
        for row in documented where !declared.contains(row) { XCTFail("README.md has a row no declaration makes: \(row)\n\(regenerate)") }
        if Set(documented) == Set(declared) { XCTAssertEqual(documented, declared, "same rows, other order: \(regenerate)") }
    }
}
