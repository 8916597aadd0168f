import Foundation
import XCTest

/// Runs the WebSocket conformance suite (`Tests/conformance/run_conformance.py`: the Autobahn
/// TestSuite cases, driven by kosoku, against the relay's echo endpoint) in its fast mode;
/// `RELAY_CONFORMANCE_FULL=1` runs every case (about 12 minutes). Results: docs/CONFORMANCE.md.
final class ConformanceTests: XCTestCase {
    func testAutobahnConformance() throws {
        let full = ProcessInfo.processInfo.environment["RELAY_CONFORMANCE_FULL"] == "1"
        let timeout: Double = full ? 2400 : 900
        try PythonSuite.run(
            "WebSocket conformance (Tests/conformance/run_conformance.py)",
            arguments: ["Tests/conformance/run_conformance.py", "--no-html", "--timeout", String(Int(timeout - 60))] + (full ? ["--full"] : []),
            requirements: "Tests/conformance/requirements.txt", timeoutSeconds: timeout)
    }
}
