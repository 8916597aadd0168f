import Foundation
import XCTest

/// docs/ARCHITECTURE.md walks a `typing:start` and a receipt through the code, file by file.
/// Every type it names there must be a file in Sources (`Name.swift`), and the ones in bold must
/// be RelayServer, RelayBackends or RelayStore files, as the text says: a renamed or removed
/// file fails here instead of leaving the walk wrong.
final class ArchitectureWalkTests: XCTestCase {
    func testEveryFileTheWalkNamesExists() throws {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let doc = try String(contentsOf: root.appendingPathComponent("docs/ARCHITECTURE.md"), encoding: .utf8)
        let start = try XCTUnwrap(doc.range(of: "### The walk, file by file"), "ARCHITECTURE.md has no walk")
        let end = doc.range(of: "\n## ", range: start.upperBound..<doc.endIndex)?.lowerBound ?? doc.endIndex
        let walk = String(doc[start.upperBound..<end])

        var files: [String: String] = [:]  // file name without .swift → its target folder
        let walker = FileManager.default.enumerator(at: root.appendingPathComponent("Sources"), includingPropertiesForKeys: nil)
        while let url = walker?.nextObject() as? URL {
            guard url.pathExtension == "swift" else { continue }
            let parts = url.pathComponents
            guard let i = parts.lastIndex(of: "Sources"), i + 1 < parts.count else { continue }
            files[url.deletingPathExtension().lastPathComponent] = parts[i + 1]
        }
        XCTAssertGreaterThan(files.count, 100)

        // `Name` or `Name.member`, in bold (**`…`**) or not.
        let named = try NSRegularExpression(pattern: #"(\*\*)?`([A-Z][A-Za-z0-9]*)(\.[A-Za-z]+)?`"#)
        var checked = 0
        for match in named.matches(in: walk, range: NSRange(walk.startIndex..., in: walk)) {
            guard let nameRange = Range(match.range(at: 2), in: walk) else { continue }
            let name = String(walk[nameRange])
            let bold = match.range(at: 1).location != NSNotFound
            checked += 1
            guard let target = files[name] else {
                XCTFail("the walk names \(name), but Sources has no \(name).swift")
                continue
            }
            if bold {
                XCTAssertTrue(["RelayServer", "RelayBackends", "RelayStore"].contains(target), "\(name) is in bold but is a \(target) file")
            }
        }
        XCTAssertGreaterThan(checked, 30, "read the walk")

        // Each walk states how many components it crosses (#41: at most 15, bytes to bytes), and
        // the typing walk lists them: the list must hold as many names as the count says.
        let counts = try NSRegularExpression(pattern: #"Components[^*]*\*\*([0-9]+)\*\*"#)
        let stated = counts.matches(in: walk, range: NSRange(walk.startIndex..., in: walk)).compactMap { Range($0.range(at: 1), in: walk).flatMap { Int(walk[$0]) } }
        XCTAssertEqual(stated.count, 2, "the typing walk and the receipt walk each state their count")
        for count in stated { XCTAssertLessThanOrEqual(count, 15, "a walk crosses at most 15 components") }
        let list = try XCTUnwrap(walk.range(of: #"\*\*[0-9]+\*\* —[^(]*"#, options: .regularExpression), "the typing walk lists its components")
        let listed = walk[list].components(separatedBy: "`").enumerated().filter { $0.offset % 2 == 1 }.map(\.element)
        XCTAssertEqual(listed.count, stated.first, "the typing walk's list: \(listed)")
        for name in listed { XCTAssertNotNil(files[name], "\(name) is listed but Sources has no \(name).swift") }
    }
}
