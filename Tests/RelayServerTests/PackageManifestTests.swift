import Foundation
import XCTest

/// Relay is a package others can depend on by version: SwiftPM refuses a remote dependency whose
/// library products reach a target with `unsafeFlags`, so none may (issue #41). Read from
/// `swift package dump-package`, as SwiftPM itself sees the manifest.
final class PackageManifestTests: XCTestCase {
    struct DumpFailed: Error {
        let status: Int32
    }

    func testNoUnsafeFlagsReachableFromALibraryProduct() throws {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let manifest = try Self.dumpPackage(at: root)
        let targets = try XCTUnwrap(manifest["targets"] as? [[String: Any]])
        let byName = Dictionary(uniqueKeysWithValues: targets.compactMap { t in (t["name"] as? String).map { ($0, t) } })
        let products = try XCTUnwrap(manifest["products"] as? [[String: Any]])
        let libraries = products.filter { ($0["type"] as? [String: Any])?["library"] != nil }
        XCTAssertFalse(libraries.isEmpty, "the package has library products")
        for product in libraries {
            let name = product["name"] as? String ?? "?"
            var seen = Set<String>()
            var queue = product["targets"] as? [String] ?? []
            while let next = queue.popLast() {
                guard seen.insert(next).inserted, let target = byName[next] else { continue }
                XCTAssertFalse(
                    Self.mentionsUnsafeFlags(target["settings"] as Any),
                    "library product \(name) reaches target \(next), which has unsafeFlags: SwiftPM would refuse Relay as a dependency")
                queue += Self.localDependencies(of: target)
            }
            XCTAssertFalse(seen.isEmpty, "walked the targets of \(name)")
        }
    }

    /// The names of the package's own targets `target` depends on (`byName` and `target` entries;
    /// `product` entries are other packages').
    static func localDependencies(of target: [String: Any]) -> [String] {
        (target["dependencies"] as? [[String: Any]] ?? []).compactMap { dependency in
            for key in ["byName", "target"] {
                if let entry = dependency[key] as? [Any], let name = entry.first as? String { return name }
            }
            return nil
        }
    }

    static func mentionsUnsafeFlags(_ value: Any) -> Bool {
        if let object = value as? [String: Any] {
            return object.keys.contains("unsafeFlags") || object.values.contains(where: mentionsUnsafeFlags)
        }
        if let array = value as? [Any] { return array.contains(where: mentionsUnsafeFlags) }
        return false
    }

    static func dumpPackage(at root: URL) throws -> [String: Any] {
        // A scratch path of its own: `swift test` holds the lock of `.build` while this runs, and a
        // second SwiftPM on it would wait for that lock for ever.
        let scratch = FileManager.default.temporaryDirectory.appendingPathComponent("relay-dump-package-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: scratch) }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["swift", "package", "--package-path", root.path, "--scratch-path", scratch.path, "dump-package"]
        // As a package that depends on Relay sees it: without Relay's own opt-in.
        var environment = ProcessInfo.processInfo.environment
        environment["RELAY_CROSS_MODULE_OPTIMIZATION"] = nil
        process.environment = environment
        let output = Pipe()
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        try process.run()
        // Bounded: a SwiftPM that hangs fails the test instead of the run.
        let deadline = DispatchTime.now() + .seconds(300)
        let watchdog = DispatchWorkItem { if process.isRunning { process.terminate() } }
        DispatchQueue.global().asyncAfter(deadline: deadline, execute: watchdog)
        let data = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        watchdog.cancel()
        guard process.terminationStatus == 0 else { throw DumpFailed(status: process.terminationStatus) }
        return try XCTUnwrap(JSONSerialization.jsonObject(with: data) as? [String: Any])
    }
}
