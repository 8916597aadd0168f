import Foundation
import XCTest

/// RelayServer's folders depend on each other one way only: for any two folders, at most one
/// names the other's types (a type belongs to the folder of the file that declares it at top
/// level; comments and string literals are not read). A pair in both directions is the kind of
/// tangle the hub and the session grew into; this test stops a new one.
final class FolderDependencyTests: XCTestCase {
    func testNoTwoFoldersReferenceEachOtherBothWays() throws {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("Sources/RelayServer")
        let declaration = try NSRegularExpression(
            pattern: #"^(?:@\w+(?:\([^)]*\))?\s+)*(?:(?:public|internal|private|fileprivate|package|final|open|indirect)\s+)*(?:class|struct|enum|protocol|actor|typealias)\s+([A-Z]\w*)"#,
            options: [.anchorsMatchLines])
        let noise = try NSRegularExpression(pattern: #"//.*?$|"(?:\\.|[^"\\])*""#, options: [.anchorsMatchLines])
        let identifier = try NSRegularExpression(pattern: #"\b[A-Z]\w*\b"#)

        var files: [(folder: String, code: String)] = []
        var owner: [String: String] = [:]
        let walker = FileManager.default.enumerator(at: root, includingPropertiesForKeys: nil)
        while let url = walker?.nextObject() as? URL {
            guard url.pathExtension == "swift" else { continue }
            let text = try String(contentsOf: url, encoding: .utf8)
            let folder = url.deletingLastPathComponent().lastPathComponent
            let range = NSRange(text.startIndex..., in: text)
            for match in declaration.matches(in: text, range: range) {
                if let r = Range(match.range(at: 1), in: text), owner[String(text[r])] == nil { owner[String(text[r])] = folder }
            }
            files.append((folder, noise.stringByReplacingMatches(in: text, range: range, withTemplate: "")))
        }
        XCTAssertGreaterThan(files.count, 50, "read RelayServer's sources")

        var uses: [String: Set<String>] = [:]  // "A>B": A names a type of B
        for (folder, code) in files {
            for match in identifier.matches(in: code, range: NSRange(code.startIndex..., in: code)) {
                guard let r = Range(match.range, in: code), let other = owner[String(code[r])], other != folder else { continue }
                uses["\(folder)>\(other)", default: []].insert(String(code[r]))
            }
        }
        var both: [String] = []
        for key in uses.keys {
            let parts = key.split(separator: ">").map(String.init)
            guard parts[0] < parts[1], let back = uses["\(parts[1])>\(parts[0])"] else { continue }
            both.append("\(parts[0]) -> \(parts[1]) \(uses[key]?.sorted() ?? []); \(parts[1]) -> \(parts[0]) \(back.sorted())")
        }
        XCTAssertEqual(both.sorted(), [], "folders that reference each other both ways")
    }
}
